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

from lalmeval.data.tables import BATCH, Table, TableRequest, only_columns, runs
from lalmeval.errors import UserError

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


class ArrowFilesTable(Table):
    """Rows straight from Arrow stream files: the light fields by a scan, rows by index, BATCH at a time."""

    def __init__(self, files: ArrowFiles, request: TableRequest, rows: int, columns: list[str]):
        self.files, self.request, self.count, self.columns = files, request, rows, columns

    @classmethod
    def of(cls, paths: Sequence[str], request: TableRequest) -> "ArrowFilesTable":
        """The table of these files, which must share one schema (OSError, ValueError when not readable)."""
        schema = ArrowFiles.schema_of(paths[0])
        if any(not ArrowFiles.schema_of(path).equals(schema) for path in paths[1:]):
            raise ValueError("the files do not share one schema")
        return cls(ArrowFiles(paths), request, sum(ArrowFiles.row_count(path) for path in paths), list(schema.names))

    def scan(self) -> Iterator[dict[str, Any]]:
        fields = [f for f in self.request.fields if f in self.columns]
        return self._rows(None, fields) if fields else ({} for _ in range(self.count))

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        read = None if columns is None else [c for c in self.columns if c in columns] or self.columns[:1]
        return (only_columns(row, columns) for row in self._rows(indices, read))

    def _rows(self, indices: Optional[Sequence[int]], columns: Optional[list[str]]) -> Iterator[dict[str, Any]]:
        """The rows at `indices` (all when None); only the selected rows become Python objects."""
        wanted = iter(range(self.count) if indices is None else indices)
        target = next(wanted, None)
        try:
            for start, batch in self.files.batches(columns):
                if target is None:
                    return
                picked = []
                while target is not None and target < start + batch.num_rows:
                    picked.append(target - start)
                    target = next(wanted, None)
                for first, count in runs(picked, BATCH):
                    yield from batch.slice(first, count).to_pylist()
        except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid is a ValueError: a file that went bad after opening
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"dataset '{self.request.name}': cannot read its rows: {type(exc).__name__}: {text}") from None
