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
from typing import Any, Optional, Sequence, Union

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
    the run included); safe to call from worker threads. What the folder holds is read once, then kept
    in memory: after that, a clip already kept or one past the fill is answered without the disk."""

    def __init__(self, root: Path, limit: int = KEEP_BYTES):
        self.folder = root / FOLDER
        self.limit = limit
        self._lock = threading.Lock()
        self._used: Optional[int] = None
        self._names: set[str] = set()

    def _scan(self) -> None:
        """The copies earlier sessions of the run left, and the bytes the folder holds (once)."""
        if self._used is not None:
            return
        used = 0
        try:
            for entry in os.scandir(self.folder):
                if entry.is_file():
                    used += entry.stat().st_size
                    if not entry.name.startswith("."):  # not a copy cut short while it was written
                        self._names.add(entry.name)
        except OSError:
            pass
        self._used = used

    def keep(self, data: bytes, digest: Optional[str] = None, write: bool = True) -> Union[Optional[str], object]:
        """The run-relative path of a copy of `data` (whose SHA-1 is `digest` when the caller knows it), or None
        once the run holds its fill (or the disk refuses). With `write` off, LATER when answering would need the
        disk (the first look at the folder, or a copy to write): then call again, off the event loop."""
        name = (digest or hashlib.sha1(data).hexdigest()) + extension(data)
        with self._lock:
            if self._used is None and not write:
                return LATER
            self._scan()
            assert self._used is not None
            if name in self._names:
                return f"{FOLDER}/{name}"
            if self._used + len(data) > self.limit:
                return None
            if not write:
                return LATER
            self._used += len(data)
            self._names.add(name)   # a second caller with the same clip uses this copy rather than writing its own
        path = self.folder / name
        tmp = path.with_name(f".{name}.{threading.get_ident()}.tmp")
        try:
            self.folder.mkdir(exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            with self._lock:
                self._names.discard(name)
            return None
        return f"{FOLDER}/{name}"


LATER = object()   # what ClipKeeper.keep and notes answer, with `write` off, when the answer needs the disk


def notes(sample: Sample, keeper: Optional[ClipKeeper], digests: Optional[Sequence[str]] = None,
          write: bool = True) -> Union[list[dict[str, Any]], object]:
    """One note per clip of `sample`: {"path", "span"?} for a file, {"copy", "span"?} for kept bytes, else
    {"bytes"}. `digests`: the SHA-1 of each clip's bytes when known (they are not hashed again). Blocking:
    call in an executor, unless `write` is off, which answers LATER rather than touch the disk. Never
    raises: a note is no reason to fail a sample."""
    found = []
    for index, ref in enumerate(sample.audio):
        note: dict[str, Any]
        if isinstance(ref.source, str):
            note = {"path": ref.source}
        else:
            kept = None
            try:
                digest = digests[index] if digests is not None else None
                kept = keeper.keep(ref.source, digest, write) if keeper is not None else None
            except Exception:  # noqa: BLE001 - the copy is a courtesy; the request goes on without it
                kept = None
            if kept is LATER:
                return LATER
            note = {"copy": kept} if kept else {"bytes": len(ref.source)}
        if ref.span is not None:
            note["span"] = [ref.span[0], ref.span[1]]
        found.append(note)
    return found
