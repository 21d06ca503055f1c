"""A dataset's selected samples: chosen from a light scan of its rows, then read lazily, in order.

Opening a source reads what selection needs (ids, row languages, clip lengths) and keeps only the
selected row indices and ids, so a pass knows every sample it owes a record before the first
request, and memory holds no audio. `samples()` then reads whole rows batch by batch; each call is
a fresh iterator (a run makes one, and hands each sample to every model: inference/feed).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from lalmeval.config.schema import Filters
from lalmeval.data import audiofolder, hub, webdataset  # noqa: F401  (register their formats)
from lalmeval.data.choices import gold_index, parse_options
from lalmeval.data.audio_cells import audio_refs
from lalmeval.data.cells import cell_text, check_reference_size, reference_text
from lalmeval.data.configs import folder_layout
from lalmeval.data.confine import DataFolders, folders_to_allow, hub_caches
from lalmeval.data.fields import FieldPath, heads, paths_of, physical, resolve, with_paths
from lalmeval.data.filters import RowFilter, Selection, sample_count
from lalmeval.data.folder import declares_configs
from lalmeval.media.images import ImageRef, image_ref, is_missing
from lalmeval.data.layouts import folder_format
from lalmeval.data.messages import check_placeholders, from_openai_messages, place_images
from lalmeval.data.tables import FORMATS, MemoryTable, Table, TableRequest
from lalmeval.errors import UserError
from lalmeval.config.languages import iso_code
from lalmeval.results.records import AudioRef, Sample
from lalmeval.catalog.runspecs import Dataset, kimi_file
from lalmeval.text import mended

_LOCAL_SUFFIXES = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv", ".tar": "webdataset"}


def locate(dataset: Dataset) -> tuple[str, Path]:
    """Which format reads this dataset, and from where."""
    if dataset.spec.format == "callhome":  # the one format with a reader of its own
        return "callhome", dataset.resolve_path(dataset.spec.hf_repo)
    if dataset.data_root is not None:  # format kimi under the config's dataset_root
        return "jsonl", kimi_file(dataset)
    repo = dataset.spec.hf_repo
    local = dataset.resolve_path(repo)
    looks_local = repo.startswith((".", "/", "~")) or Path(repo).suffix.lower() in _LOCAL_SUFFIXES
    if local.is_dir() and local.suffix.lower() in _LOCAL_SUFFIXES:
        raise UserError(f"{local}: data file is a directory, expected a file")
    if local.is_dir():  # save_to_disk, webdataset shards, an audio folder, or files laid out as on the hub
        return folder_format(local), local
    if local.is_file():
        kind = _LOCAL_SUFFIXES.get(local.suffix.lower())
        if kind is None:
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': unsupported data file type '{local.suffix}' ({local})")
        return kind, local
    if looks_local:
        raise UserError(f"{dataset.source}: dataset '{dataset.name}': data file not found: {local}")
    return "hub", local


DEFAULT_SPLIT = "test"


def check_local_selectors(dataset: Dataset, kind: str, path: Path) -> None:
    """subset, revision and split select parts of a hub dataset; for local data that has no such
    part they would be silently ignored, so naming one is an error.

    A folder of split files (or a save_to_disk DatasetDict) has splits: a missing one is reported
    by its reader. A single file or a CallHome folder has none: it is read whole, so `split` must be
    the default `test` or appear in its name (`split: dev` with `dev.jsonl`)."""
    spec, where = dataset.spec, f"{dataset.source}: dataset '{dataset.name}'"
    if kind == "hub" and path.is_dir() and not declares_configs(path):  # a folder of data files, not a hub snapshot: no revisions
        if spec.revision is not None:
            raise UserError(f"{where}: revision '{spec.revision}' names a hub revision, but {path} is a local folder of data files; drop revision")
        if spec.subset is not None and folder_layout(path) is None:  # laid out by configuration, subset names one (lalmeval.data.configs)
            raise UserError(f"{where}: subset '{spec.subset}' names a hub configuration, but {path} has none (no configs in its "
                            "README.md, no {config}/{split} folders of parquet files); drop subset, or point hf_repo at the subfolder you mean")
    if kind == "hub":
        return  # a hub id, or a folder read like one: its reader reports a split or configuration it lacks
    if spec.revision is not None:
        raise UserError(f"{where}: revision '{spec.revision}' names a hub revision, but {path} is local data; drop revision")
    what = {"disk": "a save_to_disk folder", "callhome": "a CallHome folder", "audiofolder": "an audio folder"}.get(kind, "a single data file")
    what = "a folder of webdataset shards" if kind == "webdataset" and path.is_dir() else what
    if spec.subset is not None:
        raise UserError(f"{where}: subset '{spec.subset}' names a hub configuration, but {path.name} is {what}, which has none; drop subset")
    if kind in ("disk", "audiofolder") or (kind == "webdataset" and path.is_dir()):
        return  # its reader checks the split against the splits it has
    if spec.split != DEFAULT_SPLIT and spec.split.lower() not in re.split(r"[^a-z0-9]+", path.name.lower()):
        raise UserError(f"{where}: split '{spec.split}' — {path.name} is {what}, which has no splits and is read whole; "
                        f"drop split, or point hf_repo at the file (or folder of split files) holding '{spec.split}'")


def _light_fields(dataset: Dataset, filters: Filters) -> list[str]:
    """The fields selection reads from every row."""
    spec = dataset.spec
    fields = [spec.id_column]
    if spec.keep_subsets and spec.subset_column:
        fields.append(spec.subset_column)
    if filters.language and spec.language_column:
        fields.append(spec.language_column)
    if filters.length_filter and spec.modality != "text":
        fields += audio_columns(spec)
    return [f for f in fields if f]


def audio_columns(spec: Any) -> list[str]:
    """The column(s) holding a row's clips, in the order they are numbered (<audio 1>, <audio 2>, ...)."""
    value = spec.audio_column
    return [value] if isinstance(value, str) else list(value or [])


def mapped_columns(dataset: Dataset) -> list[tuple[str, str]]:
    """(runspec field, column) for every column the runspec maps."""
    spec = dataset.spec
    single = {
        "additional_instruction_column": spec.additional_instruction_column,
        "textual_input_column": spec.textual_input_column, "transcript_column": spec.transcript_column,
        "id_column": spec.id_column, "language_column": spec.language_column, "subset_column": spec.subset_column,
        "messages_column": spec.messages_column, "turns_column": spec.turns_column,
    }
    pairs = [(name, column) for name, column in single.items() if column]
    pairs += [("audio_column", column) for column in (audio_columns(spec) if spec.modality != "text" else [])]
    for name in ("target_column", "choices_column", "image_column"):
        value = getattr(spec, name)
        pairs += [(name, column) for column in ([value] if isinstance(value, str) else value or [])]
    return pairs


def check_columns(dataset: Dataset, columns: list[str], where: str) -> None:
    """Every column the runspec maps must exist in the data (or be a path into one: `json.text`, see lalmeval.data.fields)."""
    for name, column in mapped_columns(dataset):
        if columns and column not in columns and resolve(column, columns) is None:
            raise UserError(f"{where}: dataset '{dataset.name}': {name} '{column}' not found (columns: {', '.join(sorted(columns))})")


def _present(columns: list[str], *names: str) -> Optional[str]:
    return next((n for n in names if n in columns), None)


def _format_columns(fmt: str, columns: list[str]) -> dict[str, Any]:
    """The column mapping a format implies, given the columns the data has."""
    if fmt == "twinkle":
        letters = []
        for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":  # option columns A, B, C, ... as far as they go
            if letter not in columns:
                break
            letters.append(letter)
        return {"textual_input_column": "question", "target_column": "answer", "choices_column": letters or None, "id_column": _present(columns, "id", "index")}
    if fmt == "kimi":
        return {"id_column": "index", "audio_column": "audio_path", "additional_instruction_column": "question", "target_column": "answer",
                "subset_column": _present(columns, "subset"), "transcript_column": _present(columns, "audio_content")}
    if fmt == "general_vqa":   # EvalScope's newer layout puts <image k> in the messages and the images in image_1 .. image_100
        return {"messages_column": "messages", "target_column": _present(columns, "answer"), "id_column": _present(columns, "id", "index"),
                "image_column": _numbered(columns, "image") or None}
    if fmt == "general_vmcq":
        images, audios = _numbered(columns, "image"), _numbered(columns, "audio")
        # audio_1 .. audio_100 beside the images: the clips go where <audio k> stands, so the question is sent with its audio
        return {"textual_input_column": "question", "choices_column": "options", "target_column": "answer",
                "image_column": images or None, "id_column": _present(columns, "id", "index"),
                **({"audio_column": audios, "modality": "audio_text"} if audios else {})}
    return {}


def _numbered(columns: list[str], kind: str) -> list[str]:
    """image_1 .. image_100 (or audio_k), up to the first missing one, as EvalScope reads them."""
    found = []
    for k in range(1, 101):
        if f"{kind}_{k}" not in columns:
            break
        found.append(f"{kind}_{k}")
    return found


def formatted(dataset: Dataset, columns: list[str]) -> Dataset:
    """The dataset with its format's column mapping filled in wherever the runspec gave nothing."""
    preset = _format_columns(dataset.spec.format or "", columns)
    update = {k: v for k, v in preset.items() if k not in dataset.spec.model_fields_set}
    return replace(dataset, spec=dataset.spec.model_copy(update=update)) if update else dataset


def open_table(dataset: Dataset, fields: list[str], streaming: bool = False, allowed: Sequence[Path] = ()) -> tuple[Table, Path, str]:
    """The dataset's table, the folder its relative audio paths start from, and how to name it in messages."""
    kind, path = locate(dataset)
    spec = dataset.spec
    check_local_selectors(dataset, kind, path)
    if kind == "callhome":
        from lalmeval.data.callhome import read_callhome

        columns, rows = read_callhome(path, spec.segment, spec.window_s, allowed)
        return MemoryTable(columns, list(rows), fields), path, str(path)
    request = TableRequest(fields, dataset.name, spec.split, spec.subset, spec.hf_repo, streaming, spec.revision)
    table = FORMATS.get(kind, where=f"{dataset.source}: dataset '{dataset.name}'")(path, request)
    hub_id = kind == "hub" and not path.is_dir()
    where = f"{spec.hf_repo} ({dataset.source})" if hub_id else str(path)
    # Relative audio paths start at the data file's folder; Kimi's, at its dataset_root.
    base = dataset.data_root or (dataset.source.parent if hub_id else path.parent if path.is_file() else path)
    return table, base, where


def _text(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    # default=str: a struct cell may hold dates or bytes, which are still worth showing as text
    return json.dumps(value, ensure_ascii=False, default=str) if isinstance(value, (dict, list)) else str(value)


def row_id(row: dict[str, Any], index: int, dataset: Dataset, where: str) -> str:
    """The sample id of a row: its id column, or the row number; null or empty ids are errors."""
    column = dataset.spec.id_column
    if not column:
        return str(index)
    value = _text(row.get(column))
    if value is None or not value.strip():
        state = "empty" if value is not None else "null or missing"
        raise UserError(f"{where}: dataset '{dataset.name}': row {index + 1} has no id (column '{column}' is {state})")
    return value


def _choices(row: dict[str, Any], spec: Any) -> list[str]:
    """A row's options: the runspec's fixed list, one list column, or one column per option."""
    if spec.choices:
        return list(spec.choices)
    if isinstance(spec.choices_column, list):
        return parse_options([row.get(c) for c in spec.choices_column if not is_missing(row.get(c))])
    return parse_options(row.get(spec.choices_column)) if spec.choices_column else []


def _images(row: dict[str, Any], spec: Any, base: Path) -> tuple[ImageRef, ...]:
    columns = [spec.image_column] if isinstance(spec.image_column, str) else spec.image_column or []
    return tuple(image_ref(row.get(c), base) for c in columns if not is_missing(row.get(c)))


def _turns(value: Any) -> tuple[str, ...]:
    """A multi-turn row's user turns: a list (or its JSON text) of non-empty strings."""
    if isinstance(value, str):
        try:
            value = mended(json.loads(value))  # an escaped lone surrogate decodes to text no request can carry
        except (json.JSONDecodeError, RecursionError):
            raise ValueError("turns: not a list (nor its JSON text)") from None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(t, str) and t.strip() for t in value):
        raise ValueError("turns: expected a non-empty list of non-empty strings")
    return tuple(value)


def _rich_fields(row: dict[str, Any], spec: Any, base: Path) -> dict[str, Any]:
    """Options with the gold index, images, a message list, turns (ValueError names what is wrong)."""
    choices = _choices(row, spec)
    gold = gold_index(row.get(spec.target_column), choices) if choices and spec.target_column else None
    conversation = from_openai_messages(row.get(spec.messages_column), base) if spec.messages_column else None
    turns = _turns(row.get(spec.turns_column)) if spec.turns_column else ()
    images = _images(row, spec, base)
    if conversation is not None:   # a message list places the image columns itself (<image k>), else they follow it
        conversation, images = place_images(conversation, images), ()
    return {"choices": tuple(choices), "gold": gold, "images": images, "conversation": conversation, "turns": turns}


def _audio(row: dict[str, Any], spec: Any, base: Path) -> tuple[AudioRef, ...]:
    clips: list[AudioRef] = []
    for column in audio_columns(spec):
        try:
            clips += audio_refs(row.get(column), base)
        except ValueError as exc:
            raise ValueError(f"{column}: {exc}") from None
    return tuple(clips)


def _check_media(sample: Sample, spec: Any) -> None:
    """`<image k>` / `<audio k>` in what the row sends must name an image or clip it has."""
    sent = [sample.instruction, *sample.choices, sample.text_input if spec.modality != "audio" else None]
    why = " (modality 'text' sends no audio)" if spec.modality == "text" else ""
    check_placeholders(sent, len(sample.images), len(sample.audio), why)


_TEXT_FIELDS = {"instruction": "additional_instruction_column", "text_input": "textual_input_column", "transcript": "transcript_column",
                "language": "language_column", "subset": "subset_column"}


def _texts(row: dict[str, Any], spec: Any) -> dict[str, Optional[str]]:
    """The row's text fields by the rule of lalmeval.data.cells (ValueError names the column)."""
    texts = {name: cell_text(row.get(getattr(spec, field)), getattr(spec, field)) if getattr(spec, field) else None
             for name, field in _TEXT_FIELDS.items()}
    if isinstance(spec.target_column, list):  # several columns: the reference is their values as one JSON object (IFEval, BFCL)
        texts["reference"] = check_reference_size(json.dumps({c: row.get(c) for c in spec.target_column}, ensure_ascii=False, default=str),
                                                  ", ".join(spec.target_column))
    elif spec.target_column:
        texts["reference"] = reference_text(row.get(spec.target_column), spec.target_column, per_turn=bool(spec.turns_column))
    return texts


def to_sample(row: dict[str, Any], index: int, dataset: Dataset, base: Path, where: str = "data") -> Sample:
    """One row → Sample, reading the runspec's column mapping; a row whose values cannot be used
    becomes a sample with its `problem` (it fails alone, with the reason), never an exception."""
    spec = dataset.spec
    sample = Sample(id=row_id(row, index, dataset, where))
    try:
        sample = replace(sample, **_texts(row, spec))
        audio = _audio(row, spec, base) if spec.modality != "text" else ()
        rich = _rich_fields(row, spec, base) if spec.choices or spec.choices_column or spec.image_column or spec.messages_column or spec.turns_column else {}
        if rich.get("conversation") is not None:  # a message list's own clips come first: its Audio parts index them
            audio = rich["conversation"].audio + audio
        sample = replace(sample, audio=audio, **rich)
        _check_media(sample, spec)
    except ValueError as exc:  # ImageError is one: a bad row fails alone, with its reason
        return replace(sample, problem=f"data: {exc}", audio=(), conversation=None)
    except Exception as exc:  # noqa: BLE001 - a value nobody foresaw still fails only its own row
        return replace(sample, problem=f"data: {type(exc).__name__}: {exc}", audio=(), conversation=None)
    return sample


class EmptySelection(UserError):
    """A dataset that keeps no sample: the message names the filters that left its rows out."""


def _select(scan: Iterator[dict[str, Any]], dataset: Dataset, keep: RowFilter, filters: Filters, seed: int, where: str) -> tuple[list[int], list[str]]:
    """Indices and ids of the selected rows, in file order, from the light scan."""
    kept: list[int] = []
    ids: dict[int, str] = {}
    seen: set[str] = set()
    stop_early = filters.num_samples and not filters.shuffle
    selection = Selection()
    for index, light in enumerate(scan):
        sample_id = row_id(light, index, dataset, where)
        unique_id(sample_id, seen, dataset, where)
        rejected = keep.reject(light)
        selection.count(rejected)
        if rejected is None:
            kept.append(index)
            ids[index] = sample_id
            if stop_early and len(kept) >= filters.num_samples:
                break
    if not selection.rows:
        raise UserError(f"{where}: dataset '{dataset.name}': the data has no rows")
    if not kept:  # the filters left nothing: evaluating nothing is never a result
        raise EmptySelection(f"{where}: {selection.empty(dataset.name, keep)}")
    chosen = sample_count(kept, filters, seed)
    return chosen, [ids[i] for i in chosen]


def unique_id(sample_id: str, seen: set[str], dataset: Dataset, where: str) -> None:
    """Sample ids must be unique: they key records, resume and comparisons."""
    if sample_id in seen:
        raise UserError(f"{where}: dataset '{dataset.name}': duplicate sample id '{sample_id}' in {dataset.spec.id_column}")
    seen.add(sample_id)


@dataclass
class Source:
    """A dataset opened for a run: the selected rows (or, for a stream, the rule to select them)."""

    dataset: Dataset
    table: Table
    base: Path
    where: str
    filters: Filters
    indices: Optional[list[int]] = None      # None: a stream, selected while it is read
    ids: Optional[list[str]] = None
    keep: Optional[RowFilter] = field(default=None, repr=False)
    folders: Optional[DataFolders] = None    # where rows may name files; None: the data's own folder only
    paths: dict[str, FieldPath] = field(default_factory=dict)  # mapped names that are paths into an object column
    media: bool = True    # False: nothing will read the files rows name (lalmeval score), so none is checked

    @property
    def total(self) -> Optional[int]:
        """How many samples the pass owes a record (a stream knows only its num_samples cap)."""
        return len(self.ids) if self.ids is not None else self.filters.num_samples

    def samples(self) -> Iterator[Sample]:
        """The selected samples, in file order, read lazily (blocking I/O: call from a worker thread)."""
        if self.indices is None:
            yield from self._stream()
            return
        for index, row in zip(self.indices, self.table.rows(self.indices, self.columns)):
            yield self._confined(to_sample(with_paths(row, self.paths), index, self.dataset, self.base, self.where))

    def _confined(self, sample: Sample) -> Sample:
        """The sample with the files it names checked against the folders it may read (a refused one fails it)."""
        if not self.media:
            return sample
        return (self.folders or DataFolders.of([self.base])).sample(sample)

    @property
    def columns(self) -> list[str]:
        """The columns a sample is made of: only these are read (never a text-only control's audio)."""
        return physical((column for _, column in mapped_columns(self.dataset)), self.paths)

    def _stream(self) -> Iterator[Sample]:
        seen: set[str] = set()
        selection = Selection()
        for index, row in enumerate(self.table.rows(None, self.columns)):
            row = with_paths(row, self.paths)
            rejected = self.keep.reject(row) if self.keep is not None else None
            selection.count(rejected)
            if rejected is not None:
                continue
            sample = self._confined(to_sample(row, index, self.dataset, self.base, self.where))
            unique_id(sample.id, seen, self.dataset, self.where)
            yield sample
            if self.filters.num_samples and len(seen) >= self.filters.num_samples:
                return
        if not seen:  # learnt only now that the stream is read: the pass says so and the run exits 2
            if not selection.rows:
                raise EmptySelection(f"{self.where}: dataset '{self.dataset.name}': the data has no rows")
            raise EmptySelection(f"{self.where}: {selection.empty(self.dataset.name, self.keep)}")


def data_folders(dataset: Dataset, base: Path, allowed: Sequence[Path] = ()) -> DataFolders:
    """The folders this dataset's rows may name files in: its own (`base`), the hub caches for a hub
    dataset, and the config's allowed_data_dirs (see lalmeval.data.confine)."""
    kind, path = locate(dataset)
    caches = hub_caches() if kind == "hub" and not path.is_dir() else []
    return DataFolders.of([base, *caches, *allowed])


# Every column a format may map: before the data is open, its light fields must cover them all.
_FORMAT_CANDIDATES = ["id", "index", "audio_path", "question", "answer", "subset", "audio_content", "messages", "options"]


def open_source(dataset: Dataset, filters: Filters, seed: int = 0, streaming: bool = False, allowed: Sequence[Path] = (),
                media: bool = True) -> Source:
    """Open, check and select a dataset (blocking: call from a worker thread); its rows may name files
    under its own folder and the `allowed` ones (without `media` nothing reads them, and none is checked)."""
    fields = _light_fields(formatted(dataset, _FORMAT_CANDIDATES), filters)
    table, base, where = open_table(dataset, heads(fields), streaming, allowed)
    dataset = formatted(dataset, table.columns)
    check_columns(dataset, table.columns, where)
    paths = paths_of((column for _, column in mapped_columns(dataset)), table.columns)
    folders = data_folders(dataset, base, allowed)
    keep = RowFilter(dataset, filters, base, folders)
    scan = table.scan()
    if scan is None:
        if filters.shuffle and filters.num_samples:
            raise UserError(f"dataset '{dataset.name}': filters.shuffle needs the whole dataset, which a stream does not give ahead; drop shuffle or streaming")
        return Source(dataset, table, base, where, filters, keep=keep, folders=folders, paths=paths, media=media)
    indices, ids = _select((with_paths(row, paths) for row in scan), dataset, keep, filters, seed, where)
    return Source(dataset, table, base, where, filters, indices, ids, keep, folders, paths, media)


def iter_samples(dataset: Dataset, streaming: bool = False) -> Iterator[Sample]:
    """Every sample of a dataset, unfiltered (for inspection and tests)."""
    return open_source(dataset, Filters(), 0, streaming).samples()


def row_problems(dataset: Dataset, filters: Filters, seed: int = 0, streaming: bool = False,
                 allowed: Sequence[Path] = (), audio_limit: Optional[float] = None) -> tuple[int, list[tuple[str, str]], list[str]]:
    """Select a local dataset as a run would and read every selected row: (samples, [(id, problem)], the
    folders to allow for the files rows name outside the data's folder).

    What a run would fail row by row — a reference that is not text, a placeholder without its
    media, unreadable options or messages, a clip that cannot be opened or decoded or whose header
    is over `audio_limit` (max_audio_seconds; None when every model truncates) — is found before any
    request (blocking). Each clip is opened and its first second decoded: damage further in is not seen."""
    source = open_source(dataset, filters, seed, streaming, allowed)
    count, problems = 0, []
    for sample in source.samples():
        count += 1
        problem = sample.problem or _audio_problem(sample, audio_limit)
        if problem:
            problems.append((sample.id, problem))
    return count, problems, folders_to_allow(source.folders.outside if source.folders else ())


def _audio_problem(sample: Sample, limit: Optional[float]) -> Optional[str]:
    """Why a run could not decode one of the sample's clips, as it would record it; None when all open."""
    from lalmeval.media.audio import AudioError, probe

    for ref in sample.audio:
        try:
            probe(ref.source, ref.span, limit)
        except AudioError as exc:
            return f"audio: {exc}"
    return None


def inspect(dataset: Dataset, streaming: bool = False, allowed: Sequence[Path] = ()) -> list[str]:
    """Open the data as a run would — for a hub id only its schema — and check the mapped columns."""
    kind, path = locate(dataset)
    spec = dataset.spec
    if kind == "hub" and not path.is_dir():
        from lalmeval.data.hub import hub_columns

        columns, where = hub_columns(dataset.name, spec.hf_repo, spec.subset, spec.revision, spec.split), f"{spec.hf_repo} ({dataset.source})"
    else:
        table, _, where = open_table(dataset, [spec.id_column] if spec.id_column else [], streaming, allowed)
        columns = table.columns
    dataset = formatted(dataset, columns)
    check_columns(dataset, columns, where)
    return columns
