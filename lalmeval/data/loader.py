"""Load a runspec's rows (hub, parquet, jsonl, csv/tsv, save_to_disk) into Samples."""

from __future__ import annotations

import csv
import json
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from lalmeval.errors import UserError
from lalmeval.files import DuplicateKey, encoding_error, open_error, parse_json
from lalmeval.records import Sample
from lalmeval.registry import Registry
from lalmeval.runspecs import Dataset

Rows = tuple[list[str], Iterable[dict[str, Any]]]
FORMATS: Registry[Callable[[Path, Dataset, bool], Rows]] = Registry("dataset format")

_LOCAL_SUFFIXES = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "tsv"}


# The `datasets` library keeps global state (tqdm's shared lock among it) that is not safe when two
# threads load at once; every call into its loaders holds this lock.
DATASETS_LOCK = threading.Lock()


def _data_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 data file; bad bytes are an error naming the line."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise open_error(path, exc, "data file") from None
    with handle:
        for number, raw in enumerate(handle, 1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise encoding_error(path, exc, "data file", line=number) from None


@FORMATS.register("jsonl")
def _jsonl(path: Path, dataset: Dataset, streaming: bool) -> Rows:
    rows = []
    for number, line in _data_lines(path):
        if not line.strip():
            continue
        try:
            row = parse_json(line)
        except DuplicateKey as exc:
            raise UserError(f"{path}: line {number}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: line {number}: invalid JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}: line {number}: expected a JSON object")
        rows.append(row)
    columns = sorted({key for row in rows for key in row})
    return columns, rows


def _delimited(path: Path, delimiter: str) -> Rows:
    """Strict CSV/TSV: an unterminated quote or a row with the wrong number of fields names its line."""
    text = "".join(line for _, line in _data_lines(path))
    reader = csv.reader(text.splitlines(keepends=True), delimiter=delimiter, strict=True)
    kind = "TSV" if delimiter == "\t" else "CSV"
    start = 1  # the line where the row being read begins: a quoted field may run over many lines
    try:
        header = next(reader, None)
        if not header:
            raise UserError(f"{path}: the file is empty (expected a header row)")
        _check_header(path, header)
        rows = []
        start = reader.line_num + 1
        for fields in reader:
            if fields and len(fields) != len(header):
                raise UserError(f"{path}: line {start}: {len(fields)} fields where the header has {len(header)} (a stray quote or {'tab' if kind == 'TSV' else 'comma'}?)")
            if fields:
                rows.append(dict(zip(header, fields)))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise UserError(f"{path}: line {start}: malformed {kind}: {exc} (an unterminated quote?)") from None
    return header, rows


def _check_header(path: Path, header: list[str]) -> None:
    seen = set()
    for name in header:
        if name in seen:
            raise UserError(f"{path}: line 1: column '{name}' appears twice in the header")
        seen.add(name)


@FORMATS.register("csv")
def _csv(path: Path, dataset: Dataset, streaming: bool) -> Rows:
    return _delimited(path, ",")


@FORMATS.register("tsv")
def _tsv(path: Path, dataset: Dataset, streaming: bool) -> Rows:
    return _delimited(path, "\t")


@FORMATS.register("parquet")
def _parquet(path: Path, dataset: Dataset, streaming: bool) -> Rows:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise UserError(f"{path}: not a readable parquet file: {exc}") from None
    return table.column_names, table.to_pylist()


def _undecoded(ds: Any, audio_column: Optional[str]) -> Any:
    """Cast the audio column so that rows carry {bytes, path} and nothing is decoded."""
    from datasets import Audio

    features = getattr(ds, "features", None) or {}
    if audio_column and isinstance(features.get(audio_column), Audio):
        return ds.cast_column(audio_column, Audio(decode=False))
    return ds


@FORMATS.register("disk")
def _disk(path: Path, dataset: Dataset, streaming: bool) -> Rows:
    from datasets import DatasetDict, load_from_disk

    with DATASETS_LOCK:
        try:
            ds = load_from_disk(str(path))
        except Exception as exc:  # the library raises many types; the message is what matters
            raise UserError(f"{path}: dataset '{dataset.name}': not a readable save_to_disk folder: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        if isinstance(ds, DatasetDict):
            if dataset.spec.split not in ds:
                raise UserError(f"{path}: split '{dataset.spec.split}' not found (have: {', '.join(ds)})")
            ds = ds[dataset.spec.split]
        ds = _undecoded(ds, dataset.spec.audio_column)
    return list(ds.column_names), ds


@FORMATS.register("hub")
def _hub(path: Path, dataset: Dataset, streaming: bool) -> Rows:
    from datasets import load_dataset

    spec = dataset.spec
    with DATASETS_LOCK:
        try:
            repo = str(path) if path.is_dir() else spec.hf_repo
            ds = load_dataset(repo, spec.subset, split=spec.split, streaming=streaming)
        except Exception as exc:  # the hub client raises many types; the message is what matters
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': cannot load '{spec.hf_repo}': {message}") from None
        ds = _undecoded(ds, spec.audio_column)
    return list(ds.column_names or []), ds


def _locate(dataset: Dataset) -> tuple[str, Path]:
    """Which format reads this dataset, and from where."""
    repo = dataset.spec.hf_repo
    local = dataset.resolve_path(repo)
    looks_local = repo.startswith((".", "/", "~")) or Path(repo).suffix.lower() in _LOCAL_SUFFIXES
    if local.is_dir() and local.suffix.lower() in _LOCAL_SUFFIXES:
        raise UserError(f"{local}: data file is a directory, expected a file")
    if local.is_dir():
        # A save_to_disk folder has its own metadata; any other folder of data files goes through load_dataset.
        saved = any((local / marker).exists() for marker in ("dataset_info.json", "dataset_dict.json", "state.json"))
        return ("disk", local) if saved else ("hub", local)
    if local.is_file():
        kind = _LOCAL_SUFFIXES.get(local.suffix.lower())
        if kind is None:
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': unsupported data file type '{local.suffix}' ({local})")
        return kind, local
    if looks_local:
        raise UserError(f"{dataset.source}: dataset '{dataset.name}': data file not found: {local}")
    return "hub", local


def _text(value: Any) -> Optional[str]:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def _audio_fields(value: Any, base: Path) -> tuple[Optional[bytes], Optional[str]]:
    if isinstance(value, dict):
        if value.get("bytes"):
            return value["bytes"], value.get("path")
        value = value.get("path")
    if isinstance(value, str) and value:
        path = Path(value).expanduser()
        return None, str(path if path.is_absolute() else base / path)
    return None, None


def _check_columns(dataset: Dataset, columns: list[str], where: str) -> None:
    spec = dataset.spec
    wanted = {
        "audio_column": spec.audio_column if spec.modality != "text" else None,
        "target_column": spec.target_column,
        "additional_instruction_column": spec.additional_instruction_column,
        "textual_input_column": spec.textual_input_column,
        "transcript_column": spec.transcript_column,
        "id_column": spec.id_column,
        "language_column": spec.language_column,
    }
    for field, column in wanted.items():
        if column and columns and column not in columns:
            raise UserError(f"{where}: dataset '{dataset.name}': {field} '{column}' not found (columns: {', '.join(columns)})")


def _sample_id(row: dict[str, Any], index: int, dataset: Dataset, where: str) -> str:
    column = dataset.spec.id_column
    if not column:
        return str(index)
    value = _text(row.get(column))
    if value is None or not value.strip():
        raise UserError(f"{where}: dataset '{dataset.name}': row {index + 1} has no id (column '{column}' is {'empty' if value is not None else 'null or missing'})")
    return value


def to_sample(row: dict[str, Any], index: int, dataset: Dataset, base: Path, where: str = "data") -> Sample:
    """One row → Sample, reading the runspec's column mapping."""
    spec = dataset.spec
    audio_bytes, audio_path = _audio_fields(row.get(spec.audio_column), base) if spec.audio_column else (None, None)
    return Sample(
        id=_sample_id(row, index, dataset, where),
        audio_bytes=audio_bytes,
        audio_path=audio_path,
        reference=_text(row.get(spec.target_column)) if spec.target_column else None,
        instruction=_text(row.get(spec.additional_instruction_column)) if spec.additional_instruction_column else None,
        text_input=_text(row.get(spec.textual_input_column)) if spec.textual_input_column else None,
        transcript=_text(row.get(spec.transcript_column)) if spec.transcript_column else None,
        language=_text(row.get(spec.language_column)) if spec.language_column else None,
    )


def iter_samples(dataset: Dataset, streaming: bool = False) -> Iterator[Sample]:
    """Samples of a dataset in file order (blocking I/O: call off the loop)."""
    kind, path = _locate(dataset)
    columns, rows = FORMATS.get(kind)(path, dataset, streaming)
    where = str(path) if kind != "hub" else f"{dataset.spec.hf_repo} ({dataset.source})"
    _check_columns(dataset, columns, where)
    base = path.parent if kind != "hub" else dataset.source.parent
    seen: set[str] = set()
    for index, row in enumerate(rows):
        sample = to_sample(row, index, dataset, base, where)
        if sample.id in seen:
            raise UserError(f"{where}: dataset '{dataset.name}': duplicate sample id '{sample.id}' in {dataset.spec.id_column}")
        seen.add(sample.id)
        yield sample
    if not seen:
        raise UserError(f"{where}: dataset '{dataset.name}': the data has no rows")
