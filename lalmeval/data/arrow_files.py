"""Arrow stream files (a save_to_disk folder, a hub dataset's cache) read through a memory map whose
pages are let go as soon as a batch is read.

`datasets` memory-maps these files too, but every page a read touches then stays in the process's
resident memory until the map is closed: reading a 2 GB dataset once leaves 2 GB resident. Here the
record batches are zero-copy slices of a map, and after each slice is turned into rows the map's
pages are released (MADV_DONTNEED: for a read-only file map the data stays in the page cache, and a
later access simply reads it again), so resident memory follows the rows in hand, not the file.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

_RELEASE = getattr(mmap, "MADV_DONTNEED", None)  # absent where madvise is (Windows): pages then stay mapped


class ArrowFiles:
    """Record batches of a sequence of Arrow IPC stream files, as (first row index, batch)."""

    def __init__(self, paths: Sequence[str]):
        self.paths = list(paths)

    def batches(self, columns: Optional[Sequence[str]]) -> Iterator[tuple[int, Any]]:
        """Every batch of every file in order, with only `columns` (all when None); pages are released
        when the caller asks for the next batch."""
        start = 0
        for path in self.paths:
            with _Mapped(path) as mapped:
                for batch in mapped.reader():
                    picked = batch if columns is None else batch.select([c for c in batch.schema.names if c in columns])
                    yield start, picked
                    start += batch.num_rows
                    del picked, batch
                    mapped.release()

    @staticmethod
    def row_count(path: str) -> int:
        """Rows in one stream file (its batches' headers are read, not their data)."""
        import pyarrow as pa

        with pa.memory_map(path) as source:
            return sum(batch.num_rows for batch in pa.ipc.open_stream(source))

    @staticmethod
    def schema_of(path: str) -> Any:
        """The schema of one stream file (to check it is the dataset's)."""
        import pyarrow as pa

        with pa.memory_map(path) as source:
            return pa.ipc.open_stream(source).schema


class _Mapped:
    """One file mapped read-only, readable as an Arrow stream."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self) -> "_Mapped":
        with open(self.path, "rb") as handle:
            size = Path(self.path).stat().st_size
            self.map = mmap.mmap(handle.fileno(), size, prot=mmap.PROT_READ) if size else None
        return self

    def reader(self) -> Iterator[Any]:
        import pyarrow as pa

        if self.map is None:
            return iter(())
        return iter(pa.ipc.open_stream(pa.py_buffer(self.map)))

    def release(self) -> None:
        """Drop the pages read so far from this process's resident memory."""
        if self.map is not None and _RELEASE is not None:
            self.map.madvise(_RELEASE)

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.map = None  # unmapped once the last zero-copy slice of it is gone
