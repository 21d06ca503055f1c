"""Where each sample's audio came from, noted in its record so report.html can play it.

A clip read from a file is noted by its path (and the span cut from it). A clip that came as bytes
inside the data (parquet, a hub dataset) has no file to point at: a copy is kept in the run's
`audio/` folder, named by its SHA-1 (models share it), until the run has kept KEEP_BYTES of them;
past that the note says only how large the clip was. Keeping a copy is a courtesy to the reader:
a copy that cannot be written is simply not kept, and the run goes on."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path
from typing import Any, Optional

from lalmeval.results.records import Sample

KEEP_BYTES = 10_000_000   # embedded clips copied into a run: the report embeds up to this much audio (reports/audio.py)
FOLDER = "audio"
_MAGIC = ((b"RIFF", 0, ".wav"), (b"fLaC", 0, ".flac"), (b"OggS", 0, ".ogg"), (b"ID3", 0, ".mp3"), (b"ftyp", 4, ".m4a"))


def extension(data: bytes) -> str:
    """A file extension for audio bytes, from their first bytes ('.bin' when unknown)."""
    for magic, offset, ext in _MAGIC:
        if data[offset:offset + len(magic)] == magic:
            return ext
    if data[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return ".mp3"
    return ".bin"


class ClipKeeper:
    """Copies of embedded clips under `<run>/audio/`, KEEP_BYTES in all (those kept by earlier sessions of
    the run included); safe to call from worker threads."""

    def __init__(self, root: Path, limit: int = KEEP_BYTES):
        self.folder = root / FOLDER
        self.limit = limit
        self._lock = threading.Lock()
        self._used: Optional[int] = None

    def _kept(self) -> int:
        try:
            return sum(entry.stat().st_size for entry in os.scandir(self.folder) if entry.is_file())
        except OSError:
            return 0

    def keep(self, data: bytes) -> Optional[str]:
        """The run-relative path of a copy of `data`, or None once the run holds its fill (or the disk refuses)."""
        name = hashlib.sha1(data).hexdigest() + extension(data)
        path = self.folder / name
        with self._lock:
            if path.is_file() and path.stat().st_size == len(data):
                return f"{FOLDER}/{name}"
            if self._used is None:
                self._used = self._kept()
            if self._used + len(data) > self.limit:
                return None
            self._used += len(data)
        tmp = path.with_name(f".{name}.{threading.get_ident()}.tmp")
        try:
            self.folder.mkdir(exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            return None
        return f"{FOLDER}/{name}"


def notes(sample: Sample, keeper: Optional[ClipKeeper]) -> list[dict[str, Any]]:
    """One note per clip of `sample`: {"path", "span"?} for a file, {"copy", "span"?} for kept bytes, else
    {"bytes"} (blocking: call in an executor). Never raises: a note is no reason to fail a sample."""
    found = []
    for ref in sample.audio:
        note: dict[str, Any]
        if isinstance(ref.source, str):
            note = {"path": ref.source}
        else:
            kept = None
            try:
                kept = keeper.keep(ref.source) if keeper is not None else None
            except Exception:  # noqa: BLE001 - the copy is a courtesy; the request goes on without it
                kept = None
            note = {"copy": kept} if kept else {"bytes": len(ref.source)}
        if ref.span is not None:
            note["span"] = [ref.span[0], ref.span[1]]
        found.append(note)
    return found
