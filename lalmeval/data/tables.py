"""Data sources as tables: their columns, a light scan of a few fields, and whole rows read lazily.

Selection (ids, filters, num_samples) needs only a few light fields of every row; inference needs
whole rows — audio bytes included — but only one at a time. So a table is opened with the light
fields it will be asked for, `scan()` yields those, and `rows(indices, columns)` reads the rows at
the selected indices, in order — only the columns the runspec maps, so an unmapped audio column of
a text-only control is never read — holding at most a small batch in memory.
"""

from __future__ import annotations

import bisect
import csv
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from lalmeval.background import stop_if_abandoned
from lalmeval.errors import UserError
from lalmeval.files import encoding_error, open_error, parse_json_at, parse_json_text, read_text
from lalmeval.registry import Registry

# The `datasets` library keeps global state (tqdm's shared lock among it) that is not safe when two
# threads load at once; every call into its loaders holds this lock.
DATASETS_LOCK = threading.Lock()
BATCH = 64  # rows read at a time by `rows()`: bounds the audio bytes held per reader
# The csv module refuses fields over 128 KB by default, but a TSV cell may hold a base64 image or a
# message list; the whole file is in memory anyway. 2**31 - 1 fits a C long everywhere.
CSV_FIELD_LIMIT = 2**31 - 1


class Table:
    """Rows of one data source, opened for a given set of light fields."""

    columns: list[str] = []

    def scan(self) -> Optional[Iterator[dict[str, Any]]]:
        """The light fields of every row in file order; None when the source can only be streamed once."""
        raise NotImplementedError

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        """The rows at `indices` (sorted), in order, every row when None; only `columns` when given."""
        raise NotImplementedError


def only_columns(row: dict[str, Any], columns: Optional[Sequence[str]]) -> dict[str, Any]:
    """The row with only `columns` (all of it when None)."""
    return row if columns is None else {c: row[c] for c in columns if c in row}


Opener = Callable[[Path, "TableRequest"], Table]
FORMATS: Registry[Opener] = Registry("dataset format")


class TableRequest:
    """What an opener needs besides the path: light fields, hub settings, the dataset for messages."""

    def __init__(self, fields: Sequence[str], name: str, split: str = "test", subset: Optional[str] = None,
                 hub_id: Optional[str] = None, streaming: bool = False,
                 revision: Optional[str] = None, options: Optional[dict[str, Any]] = None):
        self.fields = [f for f in dict.fromkeys(fields) if f]
        self.name, self.split, self.subset, self.hub_id = name, split, subset, hub_id
        self.streaming, self.revision = streaming, revision
        self.options = options or {}


def _data_lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, raw line) of a data file."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise open_error(path, exc, "data file") from None
    with handle:
        offset = 0
        for number, raw in enumerate(handle, 1):
            if not number % 1024:
                stop_if_abandoned()
            yield number, offset, raw
            offset += len(raw)


def _decode(path: Path, number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise encoding_error(path, exc, "data file", line=number) from None


def _json_row(path: Path, number: int, text: str) -> dict[str, Any]:
    row = parse_json_at(f"{path}: line {number}", text)
    if not isinstance(row, dict):
        raise UserError(f"{path}: line {number}: expected a JSON object")
    return row


class JsonlTable(Table):
    """One JSON object per line. Opening parses every line once (validating it, learning the columns
    and keeping the light fields); whole rows are read again by byte offset when needed."""

    def __init__(self, path: Path, request: TableRequest):
        self.path = path
        self._offsets: list[int] = []
        self._light: list[dict[str, Any]] = []
        columns: dict[str, None] = {}
        for number, offset, raw in _data_lines(path):
            text = _decode(path, number, raw)
            if not text.strip():
                continue
            row = _json_row(path, number, text)
            columns.update(dict.fromkeys(row))
            self._offsets.append(offset)
            self._light.append({f: row.get(f) for f in request.fields})
        self.columns = list(columns)

    def scan(self) -> Iterator[dict[str, Any]]:
        return iter(self._light)

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        wanted = range(len(self._offsets)) if indices is None else indices
        with self.path.open("rb") as handle:
            for index in wanted:
                handle.seek(self._offsets[index])
                where = f"{self.path}: byte {self._offsets[index]}"
                try:
                    row = parse_json_at(where, handle.readline().decode("utf-8"))
                except UnicodeDecodeError:
                    row = None
                except UserError as exc:
                    raise UserError(f"{exc} (the file changed after it was opened?)") from None
                if not isinstance(row, dict):
                    raise UserError(f"{where}: not the JSON object read when the file was opened (the file changed?)")
                yield only_columns(row, columns)


class DelimitedTable(Table):
    """Strict CSV/TSV: an unterminated quote or a row with the wrong number of fields names its line."""

    def __init__(self, path: Path, request: TableRequest, delimiter: str):
        self.path, self.delimiter = path, delimiter
        self.kind = "TSV" if delimiter == "\t" else "CSV"
        self._light = [{f: row.get(f) for f in request.fields} for row in self._parse()]

    def _parse(self) -> Iterator[dict[str, str]]:
        text = "".join(_decode(self.path, number, raw) for number, _, raw in _data_lines(self.path))
        if csv.field_size_limit() < CSV_FIELD_LIMIT:  # a process-wide setting: only ever raised
            csv.field_size_limit(CSV_FIELD_LIMIT)
        reader = csv.reader(text.splitlines(keepends=True), delimiter=self.delimiter, strict=True)
        start = 1  # the line where the row being read begins: a quoted field may run over many lines
        try:
            header = next(reader, None)
            if not header:
                raise UserError(f"{self.path}: the file is empty (expected a header row)")
            self.columns = _unique_header(self.path, header)
            start = reader.line_num + 1
            for fields in reader:
                if fields and len(fields) != len(header):
                    sep = "tab" if self.kind == "TSV" else "comma"
                    raise UserError(f"{self.path}: line {start}: {len(fields)} fields where the header has {len(header)} (a stray quote or {sep}?)")
                if fields:
                    yield dict(zip(header, fields))
                start = reader.line_num + 1
        except csv.Error as exc:
            raise UserError(f"{self.path}: line {start}: malformed {self.kind}: {exc} (an unterminated quote?)") from None

    def scan(self) -> Iterator[dict[str, Any]]:
        return iter(self._light)

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        wanted = None if indices is None else iter(indices)
        target = next(wanted, None) if wanted is not None else None
        for index, row in enumerate(self._parse()):
            if wanted is None:
                yield only_columns(row, columns)
            elif index == target:
                yield only_columns(row, columns)
                target = next(wanted, None)
                if target is None:
                    return


def _unique_header(path: Path, header: list[str]) -> list[str]:
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise UserError(f"{path}: line 1: column '{name}' appears twice in the header")
        seen.add(name)
    return header


@FORMATS.register("jsonl")
def _open_jsonl(path: Path, request: TableRequest) -> Table:
    return JsonlTable(path, request)


@FORMATS.register("csv")
def _open_csv(path: Path, request: TableRequest) -> Table:
    return DelimitedTable(path, request, ",")


@FORMATS.register("tsv")
def _open_tsv(path: Path, request: TableRequest) -> Table:
    return DelimitedTable(path, request, "\t")


class ParquetTable(Table):
    """A parquet file, read one row group at a time: the scan reads only its light columns, and whole
    rows come from the row groups that hold selected rows (iter_batches would read ahead through the
    whole file). Memory is bounded by the largest row group."""

    def __init__(self, path: Path, request: TableRequest):
        import pyarrow.parquet as pq  # only paid by runs that read parquet

        self.path, self.request = path, request
        try:
            meta = pq.ParquetFile(path).metadata
            self.columns = list(meta.schema.to_arrow_schema().names)
            self._sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise UserError(f"{path}: not a readable parquet file: {exc}") from None

    def _groups(self, columns: Optional[list[str]], wanted: Optional[set[int]] = None) -> Iterator[tuple[int, Any]]:
        """(first row index, table) of each row group, skipping those not in `wanted`."""
        import pyarrow.parquet as pq

        try:
            handle = pq.ParquetFile(self.path)
            start = 0
            for group, size in enumerate(self._sizes):
                if wanted is None or group in wanted:
                    yield start, handle.read_row_group(group, columns=columns, use_threads=False)
                start += size
        except Exception as exc:  # a file that went bad after opening
            raise UserError(f"{self.path}: not a readable parquet file: {exc}") from None

    def scan(self) -> Iterator[dict[str, Any]]:
        fields = [f for f in self.request.fields if f in self.columns]
        for _, table in self._groups(fields or self.columns[:1]):
            for row in table.to_pylist():
                yield {f: row.get(f) for f in self.request.fields}

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        bounds = [0]
        for size in self._sizes:
            bounds.append(bounds[-1] + size)
        by_group: dict[int, list[int]] = {}
        for index in range(bounds[-1]) if indices is None else indices:
            by_group.setdefault(bisect.bisect_right(bounds, index) - 1, []).append(index)
        # Only the mapped columns are read from disk (pyarrow needs at least one to count rows).
        read = None if columns is None else [c for c in self.columns if c in columns] or self.columns[:1]
        for start, table in self._groups(read, set(by_group)):
            group = bisect.bisect_right(bounds, start) - 1
            # Only the selected rows become Python objects, a batch at a time; slices of consecutive
            # rows, because Table.take would load pyarrow.compute (~100 MB of kernels) for nothing.
            for first, count in _runs([i - start for i in by_group[group]], BATCH):
                yield from (only_columns(row, columns) for row in table.slice(first, count).to_pylist())


def _runs(indices: list[int], longest: int) -> Iterator[tuple[int, int]]:
    """(first, count) of runs of consecutive indices, none longer than `longest`."""
    at = 0
    while at < len(indices):
        end = at + 1
        while end < len(indices) and end - at < longest and indices[end] == indices[end - 1] + 1:
            end += 1
        yield indices[at], end - at
        at = end


@FORMATS.register("parquet")
def _open_parquet(path: Path, request: TableRequest) -> Table:
    return ParquetTable(path, request)


class MemoryTable(Table):
    """Rows already in memory (small, and never holding audio bytes: a CallHome folder's segments)."""

    def __init__(self, columns: list[str], rows: list[dict[str, Any]], fields: Sequence[str]):
        self.columns, self._rows, self._fields = columns, rows, fields

    def scan(self) -> Iterator[dict[str, Any]]:
        return ({f: row.get(f) for f in self._fields} for row in self._rows)

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        return (only_columns(row, columns) for row in (self._rows if indices is None else (self._rows[i] for i in indices)))


@FORMATS.register("json")
def _open_json_array(path: Path, request: TableRequest) -> Table:
    """A .json file: a JSON array of row objects (Twinkle's layout), else one object per line."""
    text = read_text(path, "data file")
    if not text.lstrip().startswith("["):
        return JsonlTable(path, request)
    rows = parse_json_text(path, text)
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise UserError(f"{path}: item {number} of the array is not a JSON object")
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return MemoryTable(columns, rows, request.fields)
