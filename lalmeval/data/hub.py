"""Tables read through the `datasets` library: hub ids, local hub-layout folders, save_to_disk folders."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence
from urllib.parse import urlsplit

from lalmeval.data.arrow_files import ArrowFiles, ArrowFilesTable
from lalmeval.data.arrow_memory import use_returning_pool
from lalmeval.data.configs import choose, hub_layout, located_folder
from lalmeval.data.folder import folder_read
from lalmeval.data.saved import saved_files
from lalmeval.data.tables import BATCH, DATASETS_LOCK, FORMATS, ChainTable, ParquetTable, Table, TableRequest, only_columns
from lalmeval.errors import UserError

PROBE_SECONDS = 3.0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _read(ds: Any, batch_size: int, name: str) -> Iterator[dict[str, Any]]:
    """The rows of a dataset as stored, batch by batch: read as Arrow, nothing is decoded by `datasets`
    — audio and images stay {bytes, path} structs at any depth (a list of clips, a struct holding
    one), and no decoder is ever asked for (its audio decoder needs torchcodec, and torch)."""
    try:
        for batch in ds.with_format("arrow").iter(batch_size=batch_size):
            yield from batch.to_pylist()
    except UserError:
        raise
    except Exception as exc:  # the library raises many types; the message is what matters
        raise UserError(f"dataset '{name}': cannot read its rows: {type(exc).__name__}: {_first_line(exc)}") from None


def _narrowed(ds: Any, known: list[str], columns: Optional[Sequence[str]]) -> Any:
    """`ds` with only `columns` (all of them when None or when the columns are not known ahead)."""
    if columns is None or not known:
        return ds
    return ds.select_columns([c for c in known if c in columns] or known[:1])


class ArrowTable(Table):
    """A datasets.Dataset (Arrow, memory-mapped): columns by name, rows by index, batch by batch.

    When the dataset is exactly its Arrow files (a downloaded hub dataset, a folder converted by
    `datasets`), they are read directly, releasing each batch's pages once read (see arrow_files)."""

    def __init__(self, ds: Any, request: TableRequest):
        self.ds, self.request = ds, request
        self.columns = list(ds.column_names)
        files = own_files(ds)
        self.direct = ArrowFilesTable(files, request, len(ds), self.columns) if files is not None else None

    def scan(self) -> Iterator[dict[str, Any]]:
        if self.direct is not None:
            return self.direct.scan()
        fields = [f for f in self.request.fields if f in self.columns]
        if not fields:
            return ({} for _ in range(len(self.ds)))
        return _read(self.ds.select_columns(fields), 1000, self.request.name)

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        if self.direct is not None:
            return self.direct.rows(indices, columns)
        subset = self.ds if indices is None else self.ds.select(indices)
        return (only_columns(row, columns) for row in _read(_narrowed(subset, self.columns, columns), BATCH, self.request.name))


def own_files(ds: Any) -> Optional[ArrowFiles]:
    """The dataset's Arrow files when its rows are exactly theirs, in order (no index mapping, no
    table built in memory, the same columns and row count); None otherwise."""
    try:
        paths = [entry["filename"] for entry in ds.cache_files]
        if not paths or getattr(ds, "_indices", None) is not None:
            return None
        counted = 0
        for path in paths:
            if not ArrowFiles.schema_of(path).equals(ds.data.schema):
                return None
            counted += ArrowFiles.row_count(path)
        return ArrowFiles(paths) if counted == len(ds) else None
    except Exception:  # noqa: BLE001 - anything unexpected: read through `datasets`, as before
        return None


class StreamTable(Table):
    """A streamed hub dataset: rows arrive once, in order; nothing can be scanned ahead."""

    def __init__(self, ds: Any, request: TableRequest):
        self.ds, self.request = ds, request
        features = getattr(ds, "features", None)
        self.columns = list(ds.column_names or (features or {}).keys())

    def scan(self) -> None:
        return None

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        assert indices is None, "a stream is read whole, in order"
        return (only_columns(row, columns) for row in _read(_narrowed(self.ds, self.columns, columns), BATCH, self.request.name))


def _hub_reachable() -> Optional[str]:
    """None when the hub answers a TCP connect (or a proxy is set); else why not."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parts = urlsplit(endpoint)
    host, port = parts.hostname or "huggingface.co", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
        return None
    except OSError as exc:
        return f"{host}:{port} is unreachable ({exc.strerror or exc})"


def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _load(path: Path, request: TableRequest) -> Any:
    from datasets import load_dataset

    local = path.is_dir()
    if not local and not _offline():
        problem = _hub_reachable()
        if problem:  # fail in seconds, not after a minute of retries
            raise UserError(f"dataset '{request.name}': cannot load '{request.hub_id}' from the hub: {problem}. "
                            f"Run once with network to cache it, then set HF_HUB_OFFLINE=1 to use the cache offline")
    read = folder_read(path, request.split, request.name) if local else None
    try:
        if read is not None:  # a folder of data files: exactly the files lalmeval chose, every one of them
            options = {"delimiter": read.delimiter} if read.delimiter not in (None, ",") else {}
            return load_dataset(read.builder, data_files=[str(f) for f in read.files], split="train", streaming=request.streaming, **options)
        return load_dataset(str(path) if local else request.hub_id, request.subset, split=request.split,
                            streaming=request.streaming, revision=request.revision)
    except Exception as exc:  # the library raises many types; the message is what matters
        hint = " (offline: it is not in the local cache)" if _offline() and not local else ""
        raise UserError(f"dataset '{request.name}': cannot load '{request.hub_id or path}'{hint}: {_first_line(exc)}") from None


class ParquetStreamTable(Table):
    """A streamed dataset whose data files are parquet: the files of the split read in order, each a
    page at a time (ParquetTable), instead of through `datasets`, whose parquet streaming decodes a
    whole row group per batch (a file written in one row group: all of it, several times over)."""

    def __init__(self, files: list[str], request: TableRequest):
        self.files, self.request = files, request
        self.columns = self._table(files[0]).columns

    def _table(self, file: str) -> ParquetTable:
        if "://" not in file:
            return ParquetTable(Path(file), self.request)
        import fsspec  # a hub file (hf://...): read by ranges, as `datasets` streams it

        return ParquetTable(Path(file), self.request, opener=lambda: fsspec.open(file, "rb").open())

    def scan(self) -> None:
        return None

    def rows(self, indices: Optional[Sequence[int]], columns: Optional[Sequence[str]] = None) -> Iterator[dict[str, Any]]:
        assert indices is None, "a stream is read whole, in order"
        try:
            for file in self.files:
                yield from self._table(file).rows(None, columns)
        except UserError as exc:  # names the file; say which dataset it belongs to
            raise UserError(f"dataset '{self.request.name}': cannot read its rows: {exc}") from None


def _parquet_files(path: Path, request: TableRequest) -> Optional[list[str]]:
    """The data files of the split when `datasets` would read the dataset as parquet; None otherwise."""
    from datasets import load_dataset_builder

    try:
        builder = load_dataset_builder(str(path) if path.is_dir() else request.hub_id, request.subset, revision=request.revision)
    except Exception:  # noqa: BLE001 - load_dataset, next, reports what is wrong in its own words
        return None
    if type(builder.config).__name__ != "ParquetConfig" or builder.config.filters or builder.config.columns:
        return None
    files = next((list(found) for split, found in (builder.config.data_files or {}).items() if str(split) == request.split), None)
    return [str(f) for f in files] if files else None


def _unreachable(request: TableRequest) -> None:
    """Fail in seconds, not after a minute of retries, when the hub cannot be reached."""
    if not _offline() and (problem := _hub_reachable()):
        raise UserError(f"dataset '{request.name}': cannot load '{request.hub_id}' from the hub: {problem}. "
                        f"Run once with network to cache it, then set HF_HUB_OFFLINE=1 to use the cache offline")


def _by_config(path: Path, request: TableRequest) -> Optional[Table]:
    """The split of the chosen configuration, read page by page, when the files are laid out by
    configuration as parquet (see lalmeval.data.configs); None to read through `datasets`."""
    local = path.is_dir()
    if not local:
        _unreachable(request)
    located = located_folder(path) if local else hub_layout(str(request.hub_id), request.revision)
    if located is None:
        return None
    where = f"{path}: dataset '{request.name}'" if local else f"dataset '{request.name}': '{request.hub_id}'"
    choice = choose(located.layout, request.subset, request.split, where, located.seen)
    if not choice.ours:
        return None
    paths = located.paths(choice.files, request.streaming and not _offline(), request.name)
    if request.streaming:
        return ParquetStreamTable(paths, request)
    return ChainTable([ParquetTable(Path(p), request) for p in paths])


@FORMATS.register("hub")
def _open_hub(path: Path, request: TableRequest) -> Table:
    use_returning_pool()
    configured = _by_config(path, request)
    if configured is not None:
        return configured
    with DATASETS_LOCK:
        if request.streaming:
            if not path.is_dir():
                _unreachable(request)
            files = _parquet_files(path, request)
            if files:
                return ParquetStreamTable(files, request)
        ds = _load(path, request)
    return StreamTable(ds, request) if request.streaming else ArrowTable(ds, request)


@FORMATS.register("disk")
def _open_disk(path: Path, request: TableRequest) -> Table:
    use_returning_pool()
    # Read from the folder's own metadata and Arrow files when they are as `datasets` writes them:
    # importing `datasets` alone costs a second and a half and 60 MB before the first request.
    files = saved_files(path, request)
    if files:
        try:
            return ArrowFilesTable.of(files, request)
        except (OSError, ValueError):
            pass  # load_from_disk below says what is wrong with the folder
    from datasets import DatasetDict, load_from_disk

    with DATASETS_LOCK:
        try:
            ds = load_from_disk(str(path))
        except Exception as exc:  # the library raises many types; the message is what matters
            raise UserError(f"{path}: dataset '{request.name}': not a readable save_to_disk folder: {_first_line(exc)}") from None
        if isinstance(ds, DatasetDict):
            if request.split not in ds:
                raise UserError(f"{path}: split '{request.split}' not found (have: {', '.join(ds)})")
            ds = ds[request.split]
        elif request.split not in ("test", str(ds.split)):  # one saved split: a name other than its own is a mistake
            held = f"split '{ds.split}'" if ds.split else "no split name"
            raise UserError(f"{path}: dataset '{request.name}': split '{request.split}' — this save_to_disk folder holds one dataset "
                            f"({held}), read whole; drop split or save the split you mean")
    return ArrowTable(ds, request)


def hub_columns(name: str, repo: str, subset: Optional[str], revision: Optional[str], split: str = "test") -> list[str]:
    """A hub dataset's columns from its metadata, without downloading its data."""
    from datasets import load_dataset_builder

    if not _offline() and (problem := _hub_reachable()):
        raise UserError(f"dataset '{name}': cannot reach the hub to check '{repo}': {problem}")
    located = hub_layout(repo, revision)
    if located is not None:  # laid out by configuration: the chosen split's first file's schema (its footer only)
        choice = choose(located.layout, subset, split, f"dataset '{name}': '{repo}'", located.seen)
        if choice.ours:
            return _parquet_columns(located.paths(choice.files[:1], not _offline(), name)[0], name)
    with DATASETS_LOCK:
        try:
            builder = load_dataset_builder(repo, subset, revision=revision)
        except Exception as exc:  # the library raises many types; the message is what matters
            hint = " (offline: it is not in the local cache)" if _offline() else ""
            raise UserError(f"dataset '{name}': cannot read '{repo}'{hint}: {_first_line(exc)}") from None
    return list(builder.info.features or {})


def _parquet_columns(where: str, name: str) -> list[str]:
    """The columns of a parquet file (a local path or an hf:// address), read from its footer."""
    import pyarrow.parquet as pq

    try:
        if "://" not in where:
            return list(pq.read_schema(where).names)
        import fsspec

        with fsspec.open(where, "rb") as handle:
            return list(pq.ParquetFile(handle).schema_arrow.names)
    except Exception as exc:  # noqa: BLE001 - the library raises many types; the message is what matters
        raise UserError(f"dataset '{name}': cannot read the schema of {where}: {_first_line(exc)}") from None
