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
import itertools
import threading
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Optional, Sequence

from lalmeval.background import stop_if_abandoned
from lalmeval.data.arrow_memory import release_freed, use_returning_pool
from lalmeval.errors import UserError
from lalmeval.files import encoding_error, open_error, parse_json_at, parse_json_text, read_text
from lalmeval.registry import Registry

# The `datasets` library keeps global state (tqdm's shared lock among it) that is not safe when two
# threads load at once; every call into its loaders holds this lock.
DATASETS_LOCK = threading.Lock()
BATCH = 64  # rows read at a time by `rows()`: bounds the audio bytes held per reader
SCAN_BATCH = 4096  # rows of light fields (ids, languages) decoded at a time by a scan
READ_BUFFER = 1 << 20  # bytes a parquet reader fetches at a time
HEAVY_BYTES = 16 << 20  # a binary column holding more than this in a row group is read page by page
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
        return raw.decode("utf-8-sig" if number == 1 else "utf-8")  # a byte-order mark opens some files
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
                    row = parse_json_at(where, handle.readline().decode("utf-8-sig" if not self._offsets[index] else "utf-8"))
                except UnicodeDecodeError:
                    row = None
                except UserError as exc:
                    raise UserError(f"{exc} (the file changed after it was opened?)") from None
                if not isinstance(row, dict):
                    raise UserError(f"{where}: not the JSON object read when the file was opened (the file changed?)")
                yield only_columns(row, columns)


class DelimitedTable(Table):
    """Strict CSV/TSV: an unterminated quote or a row with the wrong number of fields names its line.

    The file is read as the csv module asks (newline="": its own line handling, so a quoted cell
    keeps U+2028, U+2029, NEL and form feeds as text, and CRLF, LF and CR all end rows), streamed
    rather than held whole, with a leading byte-order mark dropped (Excel's "CSV UTF-8" writes one)."""

    def __init__(self, path: Path, request: TableRequest, delimiter: str):
        self.path, self.delimiter = path, delimiter
        self.kind = "TSV" if delimiter == "\t" else "CSV"
        self._light = [{f: row.get(f) for f in request.fields} for row in self._parse()]

    def _parse(self) -> Iterator[dict[str, str]]:
        if csv.field_size_limit() < CSV_FIELD_LIMIT:  # a process-wide setting: only ever raised
            csv.field_size_limit(CSV_FIELD_LIMIT)
        try:
            handle = self.path.open(encoding="utf-8-sig", newline="")
        except OSError as exc:
            raise open_error(self.path, exc, "data file") from None
        with handle:
            try:
                yield from self._records(csv.reader(handle, delimiter=self.delimiter, strict=True))
            except UnicodeDecodeError:
                _raise_encoding_error(self.path)
                raise

    def _records(self, reader: Any) -> Iterator[dict[str, str]]:
        start = 1  # the line where the row being read begins: a quoted field may run over many lines
        try:
            header = next(reader, None)
            if not header:
                raise UserError(f"{self.path}: the file is empty (expected a header row)")
            self.columns = _unique_header(self.path, header)
            start = reader.line_num + 1
            for number, fields in enumerate(reader):
                if not number % 1024:
                    stop_if_abandoned()
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


def _raise_encoding_error(path: Path) -> None:
    """The line of the first bytes that are not UTF-8, as a UserError (the text reader only knows a buffer offset)."""
    for number, _, raw in _data_lines(path):
        _decode(path, number, raw)


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
    """A parquet file, read in slices of BATCH rows whatever its row groups: a file written in one
    row group (pyarrow's and pandas' default) is never decoded whole. The scan reads only its light
    columns; whole rows come only from the row groups that hold selected rows, and only the selected
    rows become Python objects. A large binary column (the audio bytes) is read one page at a time
    (parquet_pages), the rest through pyarrow, so memory is bounded by a page, not by the row group."""

    def __init__(self, path: Path, request: TableRequest, opener: Optional[Callable[[], BinaryIO]] = None):
        import pyarrow.parquet as pq  # only paid by runs that read parquet

        use_returning_pool()
        self.path, self.request = path, request
        self.open = opener or (lambda: open(path, "rb"))  # a streamed hub file opens through fsspec
        try:
            with self.open() as handle:
                meta = pq.ParquetFile(handle).metadata
            self.columns = list(meta.schema.to_arrow_schema().names)
            self._sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise UserError(f"{path}: not a readable parquet file: {exc}") from None
        self._starts = [0]
        for count in self._sizes:
            self._starts.append(self._starts[-1] + count)

    def scan(self) -> Iterator[dict[str, Any]]:
        fields = [f for f in self.request.fields if f in self.columns]
        for row in self._read(None, fields or self.columns[:1], SCAN_BATCH):
            yield {f: row.get(f) for f in self.request.fields}

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        # Only the mapped columns are read from disk (pyarrow needs at least one to count rows).
        read = self.columns if columns is None else [c for c in self.columns if c in columns] or self.columns[:1]
        return (only_columns(row, columns) for row in self._read(indices, read, BATCH))

    def _read(self, indices: Optional[Sequence[int]], columns: list[str], size: int) -> Iterator[dict[str, Any]]:
        """The rows at `indices` (sorted; every row when None), only `columns`, `size` rows decoded at a time."""
        import pyarrow.parquet as pq

        try:
            with self.open() as source:
                # No pre-buffering and a small read buffer: pages are fetched as they are decoded, so a
                # row group is never held whole (pre_buffer would read all of its column chunks at once).
                handle = pq.ParquetFile(source, pre_buffer=False, buffer_size=READ_BUFFER)
                yield from self._groups(handle, iter(range(self._starts[-1]) if indices is None else indices), columns, size)
        except (UserError, GeneratorExit):
            raise
        except Exception as exc:  # a file that went bad after opening
            raise UserError(f"{self.path}: not a readable parquet file: {exc}") from None

    def _groups(self, handle: Any, wanted: Iterator[int], columns: list[str], size: int) -> Iterator[dict[str, Any]]:
        target = next(wanted, None)
        while target is not None:
            group = bisect.bisect_right(self._starts, target) - 1
            heavy = heavy_columns(handle, self.open, group, columns)
            for start, batch, values in _group_slices(handle, group, self._starts[group], columns, heavy, BATCH if heavy else size):
                picked = []
                while target is not None and target < start + len(values):
                    picked.append(target - start)
                    target = next(wanted, None)
                # Slices of consecutive rows, because Table.take would load pyarrow.compute (~100 MB of kernels) for nothing.
                for first, count in runs(picked, BATCH):
                    part = batch.slice(first, count).to_pylist() if batch is not None else [{} for _ in range(count)]
                    for at, row in enumerate(part, first):
                        yield _with_heavy(row, values[at])
                if target is None or target >= self._starts[group + 1]:
                    break  # the rest of this row group holds no selected row
            release_freed()


def heavy_columns(handle: Any, opener: Callable[[], BinaryIO], group: int, columns: Sequence[str]) -> dict[str, Any]:
    """{leaf path: BinaryColumn} of the large binary leaves among `columns` in a row group: a
    top-level binary column, or a binary field of a top-level struct whose other fields are flat."""
    from lalmeval.data.parquet_pages import BinaryColumn, Unsupported

    schema, chunks = handle.schema, handle.metadata.row_group(group)
    leaves = [schema.column(i).path for i in range(len(schema))]
    found = {}
    for i, leaf in enumerate(leaves):
        parts = leaf.split(".")
        if parts[0] not in columns or chunks.column(i).total_uncompressed_size < HEAVY_BYTES:
            continue
        if len(parts) > 2 or any(p.count(".") > 1 for p in leaves if p.startswith(parts[0] + ".")) or not _binary(handle, parts):
            continue
        column = schema.column(i)
        try:
            found[leaf] = BinaryColumn(opener, chunks.column(i), column.max_definition_level, column.max_repetition_level)
        except Unsupported:
            continue
    return found


def _binary(handle: Any, parts: list[str]) -> bool:
    """Whether a leaf holds bytes (a string column is BYTE_ARRAY on disk too, but reads as text)."""
    import pyarrow as pa

    kind = handle.schema_arrow.field(parts[0]).type
    if len(parts) == 2:
        if not pa.types.is_struct(kind) or kind.get_field_index(parts[1]) < 0:
            return False
        kind = kind.field(parts[1]).type
    return pa.types.is_binary(kind) or pa.types.is_large_binary(kind)


def _group_slices(handle: Any, group: int, start: int, columns: list[str], heavy: dict[str, Any], size: int) -> Iterator[tuple[int, Any, list]]:
    """(first row index, pyarrow batch of the other columns or None, [{leaf: value} per row]) of one row group."""
    light: list[str] = []
    for name in columns:
        fields = [leaf for leaf in heavy if leaf.split(".")[0] == name]
        if not fields:
            light.append(name)
        elif fields != [name]:  # a struct: its other fields through pyarrow, the heavy one from its pages
            light += [leaf for leaf in (handle.schema.column(i).path for i in range(len(handle.schema)))
                      if leaf.startswith(name + ".") and leaf not in heavy]
    streams = {leaf: column.values() for leaf, column in heavy.items()}
    total = handle.metadata.row_group(group).num_rows
    batches = handle.iter_batches(batch_size=size, row_groups=[group], columns=light, use_threads=False) if light else None
    done = 0
    while done < total:
        batch = next(batches) if batches is not None else None
        count = batch.num_rows if batch is not None else min(size, total - done)
        values = [dict(zip(streams, row)) for row in zip(*(itertools.islice(s, count) for s in streams.values()))] if streams else [{}] * count
        yield start + done, batch, values
        done += count


def _with_heavy(row: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The row with the values read page by page put in place (a struct's field inside the struct)."""
    for leaf, value in values.items():
        name, _, field = leaf.partition(".")
        if not field:
            row[name] = value
        elif row.get(name) is not None:
            row[name][field] = value
    return row


def runs(indices: list[int], longest: int) -> Iterator[tuple[int, int]]:
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


class ChainTable(Table):
    """Several tables read as one, in order: the metadata files of an audio folder's split, the parquet
    files of a hub configuration's split. Each part keeps its own bounded reading."""

    def __init__(self, parts: Sequence[Table]):
        self.parts = list(parts)
        self.columns = list(dict.fromkeys(c for part in self.parts for c in part.columns))
        self._counts: list[Optional[int]] = [None] * len(self.parts)

    def scan(self) -> Optional[Iterator[dict[str, Any]]]:
        scans = [part.scan() for part in self.parts]
        if any(scan is None for scan in scans):
            return None
        return self._counted(scans)

    def _counted(self, scans: list[Any]) -> Iterator[dict[str, Any]]:
        for number, scan in enumerate(scans):
            count = 0
            for count, light in enumerate(scan, 1):
                yield light
            self._counts[number] = count

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        if indices is None:
            for part in self.parts:
                yield from part.rows(None, columns)
            return
        start = 0
        for number, part in enumerate(self.parts):
            count = self._count(number)
            local = [i - start for i in indices if start <= i < start + count]
            if local:
                yield from part.rows(local, columns)
            start += count

    def _count(self, number: int) -> int:
        if self._counts[number] is None:  # rows asked for before a scan: count this part's rows now
            self._counts[number] = sum(1 for _ in self.parts[number].scan() or self.parts[number].rows(None, self.parts[number].columns[:1]))
        return self._counts[number]  # type: ignore[return-value]
