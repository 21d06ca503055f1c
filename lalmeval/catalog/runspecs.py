"""Runspec files: runspecs/<category>/<task_type>.json, each key one dataset."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lalmeval.catalog import bundled
from lalmeval.catalog.protocols import resolve as resolve_protocol
from lalmeval.config.generation import Generation
from lalmeval.config.languages import iso_code
from lalmeval.config.numbers import NoBooleanNumbers
from lalmeval.errors import UserError, closest
from lalmeval.files import load_json
from lalmeval.judging.templates import BINARY_METRIC, GRADED_METRIC

BUILTIN_DIR = bundled.RUNSPECS
JUDGE_METRICS = (BINARY_METRIC, GRADED_METRIC)  # the metrics a judge template is chosen for


class DatasetSpec(NoBooleanNumbers):
    """One dataset entry of a runspec file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hf_repo: str = Field(description="Hub dataset id, or a path (relative to the runspec file) to parquet/jsonl/json/csv/tsv, a folder of data files, a save_to_disk folder, or (format: callhome) a CallHome folder.")
    subset: Optional[str] = Field(None, description="Hub configuration name.")
    split: str = Field("test", description="Split to evaluate.")
    revision: Optional[str] = Field(None, description="Hub revision (branch, tag or commit), e.g. 'refs/convert/parquet' for datasets whose loading script no longer runs.")
    format: Optional[Literal["callhome", "twinkle", "kimi", "general_vqa", "general_vmcq"]] = Field(None, description="A known data layout: twinkle (question, A..D, answer), kimi (index, audio_path, question, answer, subset), general_vqa (OpenAI messages with images, answer), general_vmcq (question with <image k>, options, answer, image_k), callhome (transcripts/*.cha and audio/* under hf_repo). It presets the column mapping; fields given explicitly win.")
    segment: Literal["utterance", "turns"] = Field("utterance", description="format callhome: one sample per timed utterance, or windows of whole turns of at most window_s seconds.")
    window_s: float = Field(30.0, gt=0, le=3600, allow_inf_nan=False, description="format callhome, segment turns: the longest window, in seconds (a longer single turn is its own window).")
    language: str = Field(description="Language of the dataset: ISO code or English name.")
    target_language: Optional[str] = Field(None, description="Language of the references when it differs (speech translation); decides BLEU tokenization.")
    modality: Literal["audio", "text", "audio_text"] = Field("audio", description="audio: send the clip; text: send textual_input_column instead; audio_text: send both.")
    audio_column: Optional[Union[str, list[str]]] = Field("audio", description="Column(s) holding the audio: an HF audio struct, bytes, a file path (relative to the data file), a {path, start, end} span, or a list of those; several columns are the sample's clips in order (<audio 1>, <audio 2>, ...).")
    target_column: Optional[Union[str, list[str]]] = Field("reference", description="Column holding the reference answer; a list of columns makes the reference a JSON object of their values (for metrics that check several fields: IFEval's instruction_id_list and kwargs, BFCL's reference and tools).")
    additional_instruction_column: Optional[str] = Field(None, description="Column holding a per-row instruction (replaces `instruction`).")
    textual_input_column: Optional[str] = Field(None, description="Column holding text input (the question, or a transcript of the audio).")
    transcript_column: Optional[str] = Field(None, description="Column holding the text of the audio (shown to LLM judges, never to the model).")
    id_column: Optional[str] = Field(None, description="Column holding a stable sample id (row number when unset).")
    language_column: Optional[str] = Field(None, description="Column holding a per-row language, for filters.language.")
    subset_column: Optional[str] = Field(None, description="Column whose values group the samples: every metric reports each group in details.subsets.")
    keep_subsets: Optional[list[str]] = Field(None, min_length=1, description="Only the rows whose subset_column holds one of these values (one entry per subset of a file that mixes them, e.g. to judge each with its own template).")
    accented: bool = Field(False, description="Whether this dataset is accented speech (for filters.accented).")
    preprocessor: str = Field("GeneralPreprocessor", description="Registered preprocessor name.")
    postprocessor: str = Field("GeneralPostprocessor", description="Registered postprocessor name.")
    metrics: list[str] = Field(default_factory=list, description="Metrics that 'all' expands to.")
    instruction: Optional[str] = Field(None, description="Default instruction when the row has none.")
    transcription_prompt: Optional[str] = Field(None, min_length=1, description="inference_type: transcription only: the text sent as the request's `prompt`, which Whisper reads as the transcript that came before the clip (spelling, names), so it changes the transcript. Unset (the default), no prompt is sent and the instruction goes nowhere: a transcription endpoint then hears the clip alone, as chat models of the same weights do and as the Open ASR Leaderboard scores.")
    prompt_template: Optional[str] = Field(None, description="How the instruction is framed, as a peer frames it: '{instruction}' stands for the row's (or default) instruction, every other character is sent as written (AU-Harness's user_prompt before the dataset's instruction, lmms-eval's pre_prompt and post_prompt around its question). Without '{instruction}' the template comes first and the instruction follows on a new line.")
    reproduces: Optional[str] = Field(None, description="The peer declaration this entry reproduces, '<peer>:<task>' (peers: au_harness, lmms, lmms_v0.3, kimi), or '<peer>:<task>/<subset>' for one subset the peer judges on its own; `lalmeval list` counts entries by peer and docs/catalog.md maps each to its source.")
    choices_column: Optional[Union[str, list[str]]] = Field(None, description="Multiple choice: one column holding each row's options (a list, or a string like '(A) x (B) y'), or a list of option columns (e.g. [\"A\", \"B\", \"C\", \"D\"]).")
    choices: Optional[list[str]] = Field(None, min_length=2, max_length=26, description="Multiple choice with the same options for every row (fixed-label classification).")
    answer_extraction: Literal["default", "regex", "box", "first_letter", "llm", "mmmu", "mmmu_letters", "vocalsound", "listening_mcq", "exact_match", "whole_label", "refusal"] = Field("default", description="How a multiple-choice reply becomes an option: default (explicit final answers, negations, CJK, option text), regex (answer_pattern), box, first_letter, llm (the judge maps replies default cannot read), or a peer's parser: mmmu / mmmu_letters (lmms-eval's mmar / muchomusic parser; a reply it cannot read counts 1/k, the expected value of the letter it guesses), vocalsound (lmms-eval's VocalSound reading), listening_mcq (lmms-eval's cn_college_listen_mcq / dream_tts_mcq reading); for a free answer, exact_match (lmms-eval's exact_match: the whole reply, stripped, equal to the reference once case and ASCII punctuation are ignored), whole_label (lmms-eval's vggsound match: equal once case and spacing are ignored); with no reference, refusal (VoiceBench's refusal phrases: a declined harmful request is correct).")
    answer_pattern: Optional[str] = Field(None, description="answer_extraction regex: a pattern with one group holding the letter or the option text; the last match wins.")
    mc_template: Optional[str] = Field(None, description="Multiple choice: name of the template (prompts file section mc_templates) that shows the question and options.")
    image_column: Optional[Union[str, list[str]]] = Field(None, description="Column(s) holding images: a path (relative to the data file), an http(s) URL, a data URI, or an image struct {bytes, path}.")
    turns_column: Optional[str] = Field(None, description="Multi-turn: column holding a list of user turns (MT-Bench style); each reply is appended to the conversation before the next turn. With one clip per turn, clip i goes with turn i.")
    messages_column: Optional[str] = Field(None, description="Column holding an OpenAI-style message list (system prompt, text and image parts): the whole prompt (format general_vqa).")
    long_audio: Optional[Literal["chunk", "truncate", "vad"]] = Field(None, description="How this dataset's audio longer than the model's chunk_size is sent (overrides the model's long_audio).")
    shuffle_options: Optional[bool] = Field(None, description="Multiple choice: permute options per sample with the run's seed (overrides the config's shuffle_options).")
    repeat_runs: Optional[int] = Field(None, ge=1, le=100, description="Ask every sample this many times (overrides the config's repeat_runs).")
    generation_kwargs: Generation = Field(default_factory=Generation, description="Generation settings for this dataset (top_p, max_tokens, stop, extra_body, ...): above the model's own, below config overrides that name the task.")
    origin: Optional[str] = Field(None, description="Where this definition comes from: the dataset card and paper (documentation only).")
    protocol: str = Field("lalmeval", description="Scoring convention (a registered protocol name, or name@version): presets normalizer and error_unit (and any other field it defines) for the dataset's language; fields set here win. lalmeval, kimi, lmms, open_asr, au_harness.")
    judge_template: Optional[Union[str, dict[str, str]]] = Field(None, description="LLM judges (llm_judge_binary / llm_judge_detailed): the judge template — default (lalmeval's prompts), a published one (audiobench, au_harness_binary, au_harness_detailed, kimi_yes_no, ...; see README), or a template file (.yaml) relative to this runspec file; or a mapping {judge metric: template} when the entry's binary and detailed judges each have their own (a judge metric it does not name uses default).")
    reading: Optional[Literal["verbatim", "careful", "judge"]] = Field(None, description="How replies are read before word_error_rate, bleu, chrf and label accuracy score them: careful (lead-ins, engine tags, quotes, chat closers and notes cut; a label named by a synonym; docs/reading.md), verbatim (the reply as it is), or judge (the judge picks the span or label, kept only when it is one). Default: the config's reading (careful); the peer protocols preset verbatim.")
    label_synonyms: Optional[dict[str, list[str]]] = Field(None, description="Label accuracy, careful reading: more words that name a label, {label: [word, ...]}, beside the shipped synonym sets (lalmeval/postprocess/label_synonyms.yaml).")
    normalizer: Optional[str] = Field(None, description="Text normalizer of error rates (a registered name, or 'none'); default: the protocol's for the language (lalmeval: whisper_english for English, chinese for Chinese and Cantonese, basic otherwise).")
    error_unit: Optional[Literal["word", "character", "mixed"]] = Field(None, description="What error rates count: words, characters, or mixed (each CJK character and each other word a token); default: the protocol's for the language (lalmeval: mixed for zh/yue, character for ja/ko/th/lo/my/km, word otherwise).")


    def judge_template_for(self, metric: str) -> Optional[str]:
        """The judge template this entry names for `metric` (None: the default)."""
        if isinstance(self.judge_template, dict):
            return self.judge_template.get(metric)
        return self.judge_template


CHOICE_FORMATS = ("twinkle", "general_vmcq")  # formats whose column mapping finds the options itself

# What a format presets at the runspec level; the column mapping waits for the data's columns.
_FORMAT_SPEC = {
    "twinkle": {"modality": "text", "audio_column": None, "metrics": ["accuracy"]},
    "kimi": {},
    "general_vqa": {"modality": "text", "audio_column": None, "metrics": ["bleu", "rouge"]},
    "general_vmcq": {"modality": "text", "audio_column": None, "metrics": ["accuracy"]},
    "callhome": {"id_column": "id"},
}


def with_format_defaults(spec: "DatasetSpec") -> "DatasetSpec":
    """The spec with its format's presets filled in wherever the runspec gave nothing."""
    preset = _FORMAT_SPEC.get(spec.format or "", {})
    filled = spec.model_copy(update={k: v for k, v in preset.items() if k not in spec.model_fields_set})
    # Presets are not the runspec's own choice: the data's columns may still refine them (general_vmcq with audio_k).
    object.__setattr__(filled, "__pydantic_fields_set__", set(spec.model_fields_set))
    return filled


def with_protocol_defaults(spec: "DatasetSpec", where: str) -> "DatasetSpec":
    """The spec with its protocol's presets for its language filled in wherever the runspec gave nothing."""
    protocol = resolve_protocol(spec.protocol, f"{where}: protocol")
    try:
        preset = protocol.fields(iso_code(spec.language))
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    given = {k: v for k, v in preset.items() if k not in spec.model_fields_set}
    try:
        return DatasetSpec.model_validate({**spec.model_dump(exclude_unset=True), **given}) if given else spec
    except ValidationError as exc:  # a protocol presetting a value the field refuses is a bug in its definition
        raise UserError(f"{where}: protocol '{protocol.name}' presets an invalid value: {exc.errors()[0]['msg']}") from None


@dataclass(frozen=True)
class Dataset:
    """A named dataset with where it was declared."""

    name: str
    category: str
    task_type: str
    spec: DatasetSpec
    source: Path
    group: Optional[str] = None   # the runspec entry whose folder it is one file of (a per-file format's folder)
    data_root: Optional[Path] = None  # format kimi under the config's dataset_root: where Kimi's lookup starts

    @property
    def iso_language(self) -> str:
        return iso_code(self.spec.language)

    @property
    def iso_target_language(self) -> str:
        """Language of the references: target_language when set, else language."""
        return iso_code(self.spec.target_language or self.spec.language)

    def resolve_path(self, value: str) -> Path:
        """A path from the runspec, relative to the runspec file."""
        return (self.source.parent / value).resolve()

    def matches(self, name: str) -> bool:
        """Whether `name` denotes this dataset, its folder's entry, its task type or its category."""
        return name in (self.name, self.group, self.task_type, self.category)


PEERS = ("au_harness", "lmms", "lmms_v0.3", "kimi")  # whose declarations `reproduces` may name


class GroupSpec(BaseModel):
    """A runspec entry that stands for other entries and reports a group score over them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    members: list[str] = Field(min_length=1, description="Datasets or other groups this group stands for (a nested group contributes its datasets).")
    aggregation: Literal["mean", "weighted_mean"] = Field("mean", description="The group score from its datasets' scores: mean (each dataset weighs 1, as AU-Harness aggregates and lm-eval's aggregate_metric_list without weight_by_size) or weighted_mean (by scored samples, weight_by_size true).")
    reproduces: Optional[str] = Field(None, description="The peer group this reproduces, '<peer>:<group>'.")
    origin: Optional[str] = Field(None, description="Where this group comes from (documentation only).")


@dataclass(frozen=True)
class Group:
    """A named group of datasets with where it was declared."""

    name: str
    category: str
    task_type: str
    spec: GroupSpec
    source: Path


def _validation_error(path: Path, name: str, exc: ValidationError, model: type[BaseModel]) -> UserError:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        return UserError(f"{path}: dataset '{name}': unknown field '{field}'{closest(field, model.model_fields)}")
    hint = ""
    if err["type"] == "literal_error":  # e.g. error_unit: name the closest valid value
        hint = f" (got {err['input']!r})" + closest(str(err["input"]), re.findall(r"'([^']*)'", err["ctx"]["expected"]))
    return UserError(f"{path}: dataset '{name}': {field or 'entry'}: {err['msg'].removeprefix('Value error, ')}{hint}")


def _check_reproduces(path: Path, name: str, value: Optional[str]) -> None:
    peer, _, task = (value or "").partition(":")
    if value is not None and (peer not in PEERS or not task):
        raise UserError(f"{path}: dataset '{name}': reproduces must be '<peer>:<task>' with peer one of {', '.join(PEERS)} (got {value!r})")


def _check_spec(path: Path, name: str, spec: DatasetSpec) -> None:
    where = f"{path}: dataset '{name}'"
    iso_code(spec.language, where=f"{where}: language")
    if isinstance(spec.target_column, list) and (spec.choices or spec.choices_column or spec.format in CHOICE_FORMATS):
        raise UserError(f"{where}: multiple choice reads its gold answer from one target_column, not a list")
    _check_fields_apply(spec, where)
    _check_judge_template(spec.judge_template, where)
    if spec.target_language:
        iso_code(spec.target_language, where=f"{where}: target_language")
    _check_reproduces(path, name, spec.reproduces)


_SAVED_MARKERS = ("dataset_info.json", "dataset_dict.json", "state.json")


def per_file_datasets(dataset: Dataset) -> list[Dataset]:
    """A folder of several data files in a format whose tool scores each file on its own (Twinkle Eval's
    folder, EvalScope's subset files): one dataset per file, `<entry>/<file>`, grouped under the entry."""
    from lalmeval.data.folder import PER_FILE_FORMATS, declares_configs, per_file

    folder = dataset.resolve_path(dataset.spec.hf_repo)
    if dataset.spec.format not in PER_FILE_FORMATS or not folder.is_dir() or any((folder / m).exists() for m in _SAVED_MARKERS):
        return [dataset]
    if dataset.spec.subset is not None or declares_configs(folder):  # a hub snapshot: its README says which files are which
        return [dataset]
    files = per_file(folder, dataset.name)
    if len(files) < 2:  # one file is the dataset itself
        return [dataset]
    return [Dataset(f"{dataset.name}/{name}", dataset.category, dataset.task_type, dataset.spec.model_copy(update={"hf_repo": str(path)}),
                    dataset.source, group=dataset.name) for name, path in files]


@dataclass(frozen=True)
class Locations:
    """Where the config says data lives: a path per dataset (dataset_paths), Kimi's dataset_root."""

    paths: dict[str, Path] = field(default_factory=dict)
    kimi_root: Optional[Path] = None

    def place(self, dataset: Dataset) -> Dataset:
        """The dataset read from where the config says (a named path wins over the Kimi root)."""
        if dataset.name in self.paths:
            return replace(dataset, spec=dataset.spec.model_copy(update={"hf_repo": str(self.paths[dataset.name])}))
        if self.kimi_root is not None and dataset.spec.format == "kimi":
            return replace(dataset, data_root=self.kimi_root)
        return dataset


def kimi_file(dataset: Dataset) -> Path:
    """A format kimi dataset's jsonl under dataset_root, found as Kimi-Audio-Evalkit finds it: the runspec's
    hf_repo ends in <series>/<name>.jsonl, looked for at <root>/<name>/<name>.jsonl, <root>/<series>/<name>.jsonl
    and <root>/<series>/<name>/<name>.jsonl."""
    assert dataset.data_root is not None
    written = Path(dataset.spec.hf_repo)
    name, series, root = written.stem, written.parent.name or written.stem, dataset.data_root
    candidates = [root / name / f"{name}.jsonl", root / series / f"{name}.jsonl", root / series / name / f"{name}.jsonl"]
    for candidate in dict.fromkeys(candidates):
        if candidate.is_file():
            return candidate
    tried = ", ".join(str(c) for c in dict.fromkeys(candidates))
    raise UserError(f"{dataset.source}: dataset '{dataset.name}': {name}.jsonl not found under dataset_root {root} (looked at {tried})")


def _read_file(path: Path, category: str, where: Locations = Locations()) -> list[Union[Dataset, Group]]:
    raw = load_json(path, "runspec")
    if not isinstance(raw, dict):
        raise UserError(f"{path}: a runspec must be a JSON object of dataset name → settings")
    return read_entries(raw, path, category, path.stem, where)


DECLARED_CATEGORY, DECLARED_TASK_TYPE = "config", "datasets"   # where a config's own `datasets` entries stand


def read_entries(raw: dict, path: Path, category: str, task_type: str, where: Locations = Locations()) -> list[Union[Dataset, Group]]:
    """The datasets and groups of a runspec's entries, each validated; relative paths start at `path`'s folder."""
    entries: list[Union[Dataset, Group]] = []
    for name, entry in raw.items():
        if not name.strip() or any(ord(ch) < 32 for ch in name):
            raise UserError(f"{path}: dataset name {name!r} must be a non-empty name without control characters")
        model: type[BaseModel] = GroupSpec if isinstance(entry, dict) and "members" in entry else DatasetSpec
        try:
            spec = model.model_validate(entry)
        except ValidationError as exc:
            raise _validation_error(path, name, exc, model) from None
        if isinstance(spec, GroupSpec):
            _check_reproduces(path, name, spec.reproduces)
            entries.append(Group(name, category, task_type, spec, path))
            continue
        spec = with_format_defaults(spec)
        _check_spec(path, name, spec)
        spec = with_protocol_defaults(spec, f"{path}: dataset '{name}'")
        entries += per_file_datasets(where.place(Dataset(name, category, task_type, spec, path)))
    return entries


def _check_judge_template(value: Union[str, dict[str, str], None], where: str) -> None:
    """A template name (or file), or a mapping naming a template per judge metric."""
    if value is None:
        return
    named = value.items() if isinstance(value, dict) else [(None, value)]
    if isinstance(value, dict) and not value:
        raise UserError(f"{where}: judge_template: the mapping names no judge metric ({', '.join(JUDGE_METRICS)})")
    for metric, template in named:
        if metric is not None and metric not in JUDGE_METRICS:
            raise UserError(f"{where}: judge_template: '{metric}' is not a judge metric{closest(metric, JUDGE_METRICS)}; "
                            f"a template is chosen for {' or '.join(JUDGE_METRICS)}")
        if not template.strip():
            raise UserError(f"{where}: judge_template{'.' + metric if metric else ''}: give a template name or file")


def _check_fields_apply(spec: DatasetSpec, where: str) -> None:
    """Refuse fields that would be read and then do nothing with the rest of the entry."""
    if spec.answer_extraction == "regex" and not spec.answer_pattern:
        raise UserError(f"{where}: answer_extraction regex needs answer_pattern")
    if spec.answer_pattern and spec.answer_extraction != "regex":
        raise UserError(f"{where}: answer_pattern is read only by answer_extraction regex (this entry's is '{spec.answer_extraction}')")
    if spec.keep_subsets and not spec.subset_column:
        raise UserError(f"{where}: keep_subsets selects rows by their subset_column, and this entry has none")
    if spec.choices and spec.choices_column:
        raise UserError(f"{where}: give choices (the same for every row) or choices_column, not both")
    if not (spec.choices or spec.choices_column or spec.format in CHOICE_FORMATS):
        for field in ("mc_template", "shuffle_options"):
            if getattr(spec, field) is not None:
                raise UserError(f"{where}: {field} applies to multiple choice, and this dataset has no options (set choices_column or choices)")
        if spec.answer_extraction not in ("default", "exact_match", "whole_label", "refusal"):
            raise UserError(f"{where}: answer_extraction reads a multiple-choice answer, and this dataset has no options "
                            "(set choices_column or choices); other replies are compared with the reference as a label")
    elif spec.answer_extraction in ("exact_match", "whole_label", "refusal"):
        raise UserError(f"{where}: answer_extraction {spec.answer_extraction} reads a free answer, and this dataset is "
                        "multiple choice: use a multiple-choice extraction (default, mmmu, ...)")
    if spec.format != "callhome":
        for field in ("segment", "window_s"):
            if field in spec.model_fields_set:
                raise UserError(f"{where}: {field} cuts a CallHome folder (format callhome), and this entry's format is "
                                f"{spec.format or 'not set'}")
    elif "window_s" in spec.model_fields_set and spec.segment != "turns":
        raise UserError(f"{where}: window_s sizes the windows of segment turns; with segment utterance every sample is one utterance")
    if spec.messages_column or spec.format == "general_vqa":  # the message list is the whole prompt: these would be read and never sent
        for field in ("instruction", "additional_instruction_column", "textual_input_column", "turns_column", "choices_column", "choices"):
            if getattr(spec, field):
                raise UserError(f"{where}: {field} cannot apply with messages_column: each row's message list is its whole prompt "
                                "(write the instruction into the messages)")
    if spec.turns_column:  # a dialogue's user turns are its text
        for field in ("textual_input_column", "choices_column", "choices"):
            if getattr(spec, field):
                raise UserError(f"{where}: {field} cannot apply with turns_column: each turn is the user's text, sent as written")


class Catalog:
    """Every dataset (and group) of the runspec directories, addressable by dataset, group, task type or category."""

    def __init__(self, datasets: list[Dataset], groups: Optional[list[Group]] = None):
        self.datasets = {d.name: d for d in datasets}
        self.groups = {g.name: g for g in groups or []}

    @classmethod
    def load(cls, dirs: list[Path], where: Locations = Locations(), declared: Optional[tuple[dict, Path]] = None) -> "Catalog":
        """Read every runspec under `dirs` (data where `where` says), then the entries a config declares itself
        (`declared`: its `datasets` and the config file); a duplicate name is an error naming both files, a
        group member that names nothing is an error naming the group's file."""
        found: dict[str, Union[Dataset, Group]] = {}
        batches = []
        for root in dirs:
            if not root.is_dir():
                raise UserError(f"{root}: runspec directory not found")
            # <dir>/<category>/<task_type>.json (or <dir>/<task_type>.json): data folders below stay out.
            for path in sorted([*root.glob("*.json"), *root.glob("*/*.json")]):
                batches.append((path, _read_file(path, path.parent.name if path.parent != root else path.stem, where)))
        if declared and declared[0]:
            batches.append((declared[1], read_entries(declared[0], declared[1], DECLARED_CATEGORY, DECLARED_TASK_TYPE, where)))
        for path, entries in batches:
            for entry in entries:
                if entry.name in found:
                    raise UserError(f"dataset '{entry.name}' is defined twice: {found[entry.name].source} and {path}")
                found[entry.name] = entry
        datasets = [e for e in found.values() if isinstance(e, Dataset)]
        entries = set(found) | {d.group for d in datasets if d.group}
        for name in where.paths:
            if name not in entries:
                raise UserError(f"dataset_paths: unknown dataset '{name}'{closest(name, entries)}")
        catalog = cls(datasets, [e for e in found.values() if isinstance(e, Group)])
        catalog._check_groups()
        return catalog

    def _check_groups(self) -> None:
        for group in self.groups.values():
            for member in group.spec.members:
                if member not in self.datasets and member not in self.groups:
                    names = set(self.datasets) | set(self.groups)
                    raise UserError(f"{group.source}: group '{group.name}': member '{member}' is no dataset or group{closest(member, names)}")
            self.members(group.name)  # a cycle is an error here, once, rather than at every use

    def members(self, name: str, seen: tuple[str, ...] = ()) -> list[Dataset]:
        """The datasets a group stands for, in declaration order, nested groups flattened, each once."""
        if name in seen:
            raise UserError(f"{self.groups[name].source}: group '{name}' contains itself (via {' → '.join(seen + (name,))})")
        out: dict[str, Dataset] = {}
        for member in self.groups[name].spec.members:
            found = [self.datasets[member]] if member in self.datasets else self.members(member, seen + (name,))
            out.update((d.name, d) for d in found)
        return list(out.values())

    def resolve(self, name: str) -> list[Dataset]:
        """Datasets named by a dataset name, a group, else a task type, else a category."""
        if name in self.datasets:
            return [self.datasets[name]]
        if name in self.groups:
            return self.members(name)
        for level in ("group", "task_type", "category"):
            hits = [d for d in self.datasets.values() if getattr(d, level) == name]
            if hits:
                return sorted(hits, key=lambda d: d.name)
        choices = set(self.datasets) | set(self.groups) | {d.task_type for d in self.datasets.values()} | {d.category for d in self.datasets.values()}
        choices |= {d.group for d in self.datasets.values() if d.group}
        raise UserError(f"unknown dataset, task type or category '{name}'{closest(name, choices)}")

    def tree(self) -> dict[str, dict[str, list[str]]]:
        """category → task type → dataset names."""
        out: dict[str, dict[str, list[str]]] = {}
        for d in sorted(self.datasets.values(), key=lambda d: (d.category, d.task_type, d.name)):
            out.setdefault(d.category, {}).setdefault(d.task_type, []).append(d.name)
        return out


def runspec_dirs(extra: list[str], base: Path) -> list[Path]:
    """The built-in runspec directory plus the config's extra ones (relative to the config)."""
    dirs = [BUILTIN_DIR] if BUILTIN_DIR.is_dir() else []
    return dirs + [(base / d).resolve() for d in extra]


def locations(paths: dict[str, str], root: Optional[str], base: Path) -> Locations:
    """The config's dataset_paths and dataset_root, relative to the config's folder."""
    return Locations({name: (base / path).expanduser().resolve() for name, path in paths.items()},
                     (base / root).expanduser().resolve() if root else None)
