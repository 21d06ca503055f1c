"""A save_to_disk folder's Arrow files for a split, found from the metadata `datasets` writes beside
them (dataset_dict.json, state.json), without importing `datasets`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from lalmeval.data.tables import TableRequest
from lalmeval.errors import UserError


def _json(path: Path) -> Optional[Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def saved_files(path: Path, request: TableRequest) -> Optional[list[str]]:
    """The Arrow files holding the requested split, in order; None when the folder's metadata is not
    what `datasets` writes (load_from_disk then reads it, or says what is wrong with it). A split the
    folder does not hold is an error naming the ones it has."""
    splits = _json(path / "dataset_dict.json")
    if isinstance(splits, dict) and isinstance(splits.get("splits"), list):
        names = [str(name) for name in splits["splits"]]
        if request.split not in names:
            raise UserError(f"{path}: split '{request.split}' not found (have: {', '.join(names)})")
        folder = path / request.split
        state = _json(folder / "state.json")
    else:
        folder, state = path, _json(path / "state.json")
        held = state.get("_split") if isinstance(state, dict) else None
        if isinstance(state, dict) and request.split not in ("test", str(held)):  # one saved split: another name is a mistake
            what = f"split '{held}'" if held else "no split name"
            raise UserError(f"{path}: dataset '{request.name}': split '{request.split}' — this save_to_disk folder holds one dataset "
                            f"({what}), read whole; drop split or save the split you mean")
    entries = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) and isinstance(e.get("filename"), str) for e in entries):
        return None
    files = [folder / entry["filename"] for entry in entries]
    return [str(f) for f in files] if all(f.is_file() and f.parent == folder for f in files) else None
