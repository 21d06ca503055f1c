"""The audio players of report.html: each clip a record notes (lalmeval/results/clips.py) as a source the page can play.

A run is small when the distinct clips its page shows add up to EMBED_BYTES at most: then every clip
is embedded as a data: URI and the page stays whole when mailed or archived. Past that, each clip
is linked by its path relative to the run directory (a file:// URL when there is none), which plays
while the report sits beside the data it was made from. Nothing is fetched over the network."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

from lalmeval.errors import UserError
from lalmeval.files import check_regular
from lalmeval.results.clips import KEEP_BYTES, extension

EMBED_BYTES = KEEP_BYTES   # "small": the audio a page embeds whole
_TYPES = {".wav": "audio/wav", ".flac": "audio/flac", ".ogg": "audio/ogg", ".mp3": "audio/mpeg", ".m4a": "audio/mp4"}


def clip_key(note: Any) -> Optional[tuple]:
    """What tells two noted clips apart (a clip shared by every model of a sample is one), or None for a bad note."""
    if not isinstance(note, dict):
        return None
    span = note.get("span")
    span = tuple(span) if isinstance(span, list) and len(span) == 2 and all(isinstance(x, (int, float)) for x in span) else None
    for kind in ("path", "copy", "spoken"):
        if isinstance(note.get(kind), str):
            return kind, note[kind], span
    return ("bytes", note.get("bytes"), span) if isinstance(note.get("bytes"), int) else None


def _file(run_path: Path, key: tuple) -> Optional[Path]:
    """The file behind a clip, when there is a regular one to read."""
    kind, where, _ = key
    if kind == "bytes":
        return None
    path = Path(where) if kind == "path" else run_path / where   # a copy and a spoken reply lie in the run folder
    try:
        check_regular(path, "audio file")
        return path if path.is_file() else None
    except (UserError, OSError):
        return None


def _link(run_path: Path, path: Path) -> str:
    """A URL for `path` relative to the run directory (the report's folder), or its file:// URL."""
    try:
        return quote(Path(os.path.relpath(path.resolve(), run_path.resolve())).as_posix())
    except ValueError:   # another drive: no relative path leads there
        return path.resolve().as_uri()


def _media_type(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except OSError:
        return ""
    return _TYPES.get(extension(head), "")


def _label(key: tuple) -> str:
    kind, where, _ = key
    if kind == "path":
        return str(where)
    if kind == "copy":
        return f"{where} (a copy of audio the data holds)"
    if kind == "spoken":
        return f"spoken reply: {where}"
    return f"audio the data holds ({where:,} bytes; not kept: the run already keeps {KEEP_BYTES // 1_000_000} MB of copies)"


def players(run_path: Path, keys: list[tuple], embed_bytes: int = EMBED_BYTES) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """The page's audio: its files ({name, src, type}; each once, however many clips cut from it) and its
    clips ({file: index or None when nothing can play it, name, span}), and whether the files are
    embedded (they add up to `embed_bytes` at most: a small run) or linked."""
    found = [_file(run_path, key) for key in keys]
    index: dict[Path, int] = {}
    for path in found:
        if path is not None and path not in index:
            index[path] = len(index)
    embed = sum(path.stat().st_size for path in index) <= embed_bytes
    files = []
    for path in index:
        kind = _media_type(path)
        if embed:
            src = f"data:{kind or 'application/octet-stream'};base64," + base64.b64encode(path.read_bytes()).decode("ascii")
        else:
            src = _link(run_path, path)
        files.append({"name": path.name, "src": src, "type": kind})
    clips = []
    for key, path in zip(keys, found):
        name = _label(key) + (" (not found)" if path is None and key[0] != "bytes" else "")
        clips.append({"file": index[path] if path is not None else None, "name": name, "span": list(key[2]) if key[2] else None})
    return files, clips, embed
