"""Which reader a local folder needs, decided by the files it holds: the first layout that fits wins."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from lalmeval.data.audiofolder import is_audiofolder
from lalmeval.data.folder import data_files, declares_configs

SAVED_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")  # what save_to_disk writes


def _saved(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in SAVED_MARKERS)


def _shards(folder: Path) -> bool:
    """WebDataset shards, and no other data files (a hub snapshot that declares its configs is the hub's)."""
    if declares_configs(folder) or data_files(folder):
        return False
    return any(not any(p.startswith(".") for p in path.relative_to(folder).parts) for path in folder.rglob("*.tar"))


# (format name in lalmeval.data.tables.FORMATS, test); a folder none fits is read as the hub lays one out.
FOLDER_LAYOUTS: list[tuple[str, Callable[[Path], bool]]] = [("disk", _saved), ("webdataset", _shards), ("audiofolder", is_audiofolder)]


def folder_format(folder: Path) -> str:
    """The format that reads this folder: save_to_disk, webdataset shards, an audio folder, or `hub`."""
    return next((name for name, fits in FOLDER_LAYOUTS if fits(folder)), "hub")
