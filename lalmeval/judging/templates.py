"""Judge templates: what a judge is asked and how its verdict is read, chosen per dataset (runspec `judge_template`).

`default` is lalmeval's own prompts (judge_prompts.yaml, per metric and judge model); the published
templates (judge_templates.yaml) reproduce the peers' judges; a path names a user template file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import string
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lalmeval.config.generation import Generation
from lalmeval.errors import UserError, closest
from lalmeval.files import load_yaml
from lalmeval.judging.verdicts import READS, STATEMENT, Labels, Scale, Verdict

SHIPPED = Path(__file__).with_name("judge_templates.yaml")
DEFAULT = "default"
BINARY_METRIC, GRADED_METRIC = "llm_judge_binary", "llm_judge_detailed"
# What a placeholder can be filled with. `query` is the transcript of a spoken request when the
# dataset has one, else the text instruction (AudioBench's "question", whichever way it was asked).
FIELDS = ("question", "query", "reference", "transcript", "answer", "turn_number", "history", "history_with_references")
_HISTORY_FIELDS = ("history", "history_with_references")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class VerdictSpec(_Strict):
    scale: Optional[tuple[int, int]] = Field(None, description="[low, high]: the verdict is an integer rating in this range.")
    labels: Optional[dict[str, int]] = Field(None, description="{word: value}: the verdict is one of these words (any case).")
    read: str = Field(STATEMENT, description="How the verdict is read: statement (lalmeval's grammar), or as a peer reads it: "
                                             "whole_reply, last_line (words), first_number, first_number_in_halves, json_object, first_digit, "
                                             "rating_at_end (ratings).")
    peer_read: dict[str, str] = Field(default_factory=dict, description="{protocol: reading}: under that scoring protocol the "
                                      "verdict is read as that peer reads it (lalmeval's reading is printed beside it).")

    @model_validator(mode="after")
    def _one(self) -> "VerdictSpec":
        if (self.scale is None) == (self.labels is None):
            raise ValueError("give either scale: [low, high] or labels: {word: value}")
        if self.read not in READS:
            raise ValueError(f"read '{self.read}' is not a reading{closest(self.read, READS)}; readings: {', '.join(READS)}")
        kind = READS[self.read]
        if kind is not None and (kind is Labels) != (self.labels is not None):
            raise ValueError(f"read '{self.read}' reads {'words: give labels' if kind is Labels else 'ratings: give scale'}")
        if self.scale is not None and not 0 <= self.scale[0] < self.scale[1] <= 1000:
            raise ValueError("scale must be [low, high] with 0 <= low < high <= 1000")
        if self.labels is not None and (len(self.labels) < 2 or any(not w.strip() or w != w.strip() for w in self.labels)):
            raise ValueError("labels must map at least two words (without surrounding spaces) to values")
        for protocol, reading in self.peer_read.items():
            if reading not in READS or (READS[reading] is not None and (READS[reading] is Labels) != (self.labels is not None)):
                raise ValueError(f"peer_read.{protocol}: '{reading}' is not a reading of this verdict; readings: {', '.join(READS)}")
        return self

    def verdict(self) -> Verdict:
        if self.scale is not None:
            return Scale(*self.scale, read=self.read)
        return Labels({word.lower(): value for word, value in (self.labels or {}).items()}, read=self.read)


class TextsSpec(_Strict):
    system: Optional[str] = Field(None, description="System message, sent exactly as written.")
    prompt: str = Field(description="User message; {placeholders} are filled.")


class HistorySpec(_Strict):
    none: str = Field("", description="What {history} holds on the first turn.")
    user: str = Field(description="An earlier user turn: {turn_number}, {text}.")
    answer: str = Field(description="An earlier reply of the model: {turn_number}, {text}.")
    reference: str = Field("", description="An earlier turn's reference answer (for {history_with_references}).")
    separator: str = Field("\n\n", description="Between the entries.")


class ScoreSpec(_Strict):
    multiply: Optional[float] = Field(None, gt=0, le=1000, description="Printed score = (mean rating + add) x multiply; default 100 / top of the scale.")
    add: float = Field(0.0, ge=-1000, le=1000, description="See multiply.")
    round_mean: Optional[int] = Field(None, ge=0, le=6, description="Round the mean rating to this many decimals before it is "
                                      "mapped, and the printed score to 2, as a peer prints it (AU-Harness: 3); default: no rounding.")


class TemplateSpec(_Strict):
    """A judge template as written in judge_templates.yaml or a user's template file."""

    name: Optional[str] = Field(None, description="Name shown in the output (a file's default: its stem).")
    origin: Optional[str] = Field(None, description="Where the texts and settings come from (documentation only).")
    verdict: VerdictSpec = Field(description="How the verdict is read.")
    system: Optional[str] = Field(None, description="System message of every variant that gives none, sent exactly as written.")
    prompt: Optional[str] = Field(None, description="The user message (its placeholders decide which samples it fits).")
    variants: Optional[dict[Literal["reference", "reference_transcript", "open", "open_transcript"], TextsSpec]] = Field(None, description="Per-variant texts instead of prompt.")
    fields: dict[str, Literal["question", "query", "reference", "transcript", "answer", "turn_number", "history", "history_with_references"]] = Field(
        default_factory=dict, description="Placeholder → the field that fills it, for placeholders not named after a field.")
    generation: Generation = Field(default_factory=Generation, description="Judge request settings; they win over judge_temperature and judge_max_tokens.")
    score: ScoreSpec = Field(default_factory=ScoreSpec, description="How the mean rating becomes the printed score.")
    history: Optional[HistorySpec] = Field(None, description="How earlier turns of a dialogue are written for {history}.")

    @model_validator(mode="after")
    def _texts(self) -> "TemplateSpec":
        if (self.prompt is None) == (self.variants is None):
            raise ValueError("give either prompt or variants")
        if self.variants is not None and not self.variants:
            raise ValueError("variants is empty")
        return self


@dataclass(frozen=True)
class Texts:
    """The messages of one variant."""

    system: Optional[str]
    prompt: str


@dataclass(frozen=True)
class JudgeTemplate:
    """A resolved template: its texts per variant, verdict grammar, request settings and score mapping."""

    name: str
    verdict: Verdict
    variants: dict[str, Texts]
    fields: dict[str, str] = field(default_factory=dict)
    generation: dict[str, Any] = field(default_factory=dict)
    multiply: float = 100.0
    add: float = 0.0
    history: Optional[HistorySpec] = None
    round_mean: Optional[int] = None  # the peer rounds the mean rating, then the printed score to 2 decimals
    peer_read: dict[str, str] = field(default_factory=dict)  # protocol → the reading its peer applies

    def verdict_under(self, protocol: str) -> Verdict:
        """The verdict as read under a scoring protocol: the peer's reading where the template names one for it."""
        reading = self.peer_read.get(protocol.partition("@")[0])
        return replace(self.verdict, read=reading) if reading else self.verdict
    stand_ins: bool = False   # the default template shows "(empty answer)" and the like instead of empty fields

    @property
    def binary(self) -> bool:
        return self.verdict.binary

    @property
    def sha256(self) -> str:
        """SHA-256 of the texts: canonical JSON of {history, variants: {name: {prompt, system}}}."""
        texts = {"history": self.history.model_dump() if self.history else None,
                 "variants": {name: {"prompt": t.prompt, "system": t.system} for name, t in self.variants.items()}}
        return hashlib.sha256(json.dumps(texts, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()

    def identity(self) -> dict[str, str]:
        """What the output records of the template: {name, sha256}."""
        return {"name": self.name, "sha256": self.sha256}

    def variant_for(self, has_reference: bool, has_transcript: bool) -> Optional[str]:
        """The variant that fits a sample: the one showing the most of what the sample has."""
        wanted = (["reference_transcript"] if has_reference and has_transcript else []) + (["reference"] if has_reference else []) \
            + (["open_transcript"] if has_transcript else []) + ["open"]
        return next((v for v in wanted if v in self.variants), None)

    def missing(self, has_reference: bool) -> str:
        """Why no variant fits a sample (variant_for gave None), as a failure reason."""
        if not has_reference and not any(v.startswith("open") for v in self.variants):
            return "no reference answer to judge against"
        return f"no transcript to show the judge (judge template '{self.name}' shows one; set transcript_column)"

    def history_text(self, earlier: list[tuple[str, str, str]], with_references: bool) -> str:
        """Earlier turns (prompt, reply, reference) written as the template's history section says."""
        if self.history is None:
            return ""
        if not earlier:
            return self.history.none
        entries = []
        for number, (prompt, reply, reference) in enumerate(earlier, start=1):
            entries.append(self.history.user.format(turn_number=number, text=prompt))
            second = self.history.reference if with_references else self.history.answer
            entries.append(second.format(turn_number=number, text=reference if with_references else reply))
        return self.history.separator.join(entries)

    def render(self, variant: str, values: dict[str, str]) -> Texts:
        """The system message and the filled user message for `values` (a value for every field)."""
        texts = self.variants[variant]
        filled = {name: values[self.fields.get(name, name)] for name in _placeholders_of(texts.prompt)}
        return Texts(texts.system, texts.prompt.format_map(filled))

    def printed(self, rating: float) -> float:
        """A rating (or a mean of ratings) as the printed score."""
        return (rating + self.add) * self.multiply

    def printed_mean(self, mean_rating: float) -> float:
        """The printed score of a mean rating: mapped, after the peer's rounding when the template names one."""
        if self.round_mean is None:
            return self.printed(mean_rating)
        return _smart_round(self.printed(_smart_round(mean_rating, self.round_mean)), 2)


def placeholders(text: str) -> list[str]:
    """The {names} a text asks for, in order."""
    return [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]


@functools.lru_cache(maxsize=256)
def _placeholders_of(text: str) -> tuple[str, ...]:
    """placeholders of a template text, parsed once (render fills the same few texts for every sample)."""
    return tuple(placeholders(text))


def _check_texts(where: str, variant: str, texts: Texts, mapping: dict[str, str], history: bool) -> None:
    """Every placeholder fills from a field the variant has; the answer is shown."""
    try:
        parsed = list(string.Formatter().parse(texts.prompt))
    except ValueError as exc:
        raise UserError(f"{where}: malformed prompt: {exc}") from None
    shown = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion not in (None, "r", "s"):
            raise UserError(f"{where}: placeholder '{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}' must be a plain name "
                            "(write {{ and }} for a literal brace)")
        target = mapping.get(name, name)
        if target not in FIELDS:
            raise UserError(f"{where}: placeholder '{{{name}}}' cannot be filled{closest(name, FIELDS)}; fields: {', '.join(FIELDS)} "
                            "(or map it in fields:)")
        if target in _HISTORY_FIELDS and not history:
            raise UserError(f"{where}: placeholder '{{{name}}}' needs a history: section saying how earlier turns are written")
        shown.add(target)
    if "answer" not in shown:
        raise UserError(f"{where}: the prompt never shows the model's answer (a placeholder filled by 'answer')")
    if "reference" in shown and not variant.startswith("reference"):
        raise UserError(f"{where}: variant '{variant}' has no reference answer to show")
    if "transcript" in shown and not variant.endswith("transcript"):
        raise UserError(f"{where}: variant '{variant}' has no transcript to show")


def _single_variant(texts: Texts, mapping: dict[str, str]) -> str:
    """The variant a lone prompt is: it needs what its placeholders show."""
    shown = {mapping.get(name, name) for name in placeholders(texts.prompt)}
    return ("reference" if "reference" in shown else "open") + ("_transcript" if "transcript" in shown else "")


def build(spec: TemplateSpec, name: str, where: str) -> JudgeTemplate:
    """A JudgeTemplate from its written form; a problem is a UserError starting with `where`."""
    if spec.history is not None:
        for part in ("user", "answer", "reference", "none"):
            try:
                bad = [p for p in placeholders(getattr(spec.history, part)) if p not in ("turn_number", "text")]
            except ValueError as exc:
                raise UserError(f"{where}: history.{part}: malformed text: {exc}") from None
            if bad:
                raise UserError(f"{where}: history.{part}: placeholder '{{{bad[0]}}}' cannot be filled; use {{turn_number}} and {{text}}")
    if spec.prompt is not None:
        try:
            variants = {_single_variant(Texts(spec.system, spec.prompt), spec.fields): Texts(spec.system, spec.prompt)}
        except ValueError as exc:
            raise UserError(f"{where}: malformed prompt: {exc}") from None
    else:
        variants = {v: Texts(t.system if t.system is not None else spec.system, t.prompt) for v, t in (spec.variants or {}).items()}
    for variant, texts in variants.items():
        _check_texts(where if spec.prompt is not None else f"{where}: variants.{variant}", variant, texts, spec.fields, spec.history is not None)
    verdict = spec.verdict.verdict()
    if verdict.binary and (spec.score.multiply is not None or spec.score.add):
        raise UserError(f"{where}: score: a binary verdict is always printed as percent (remove score:)")
    top = verdict.high if isinstance(verdict, Scale) else max(verdict.values.values())
    multiply = spec.score.multiply if spec.score.multiply is not None else 100.0 / max(top, 1)
    return JudgeTemplate(name, verdict, variants, dict(spec.fields), spec.generation.given(), multiply, spec.score.add, spec.history,
                         spec.score.round_mean, dict(spec.verdict.peer_read))


def default_template(judge_prompts: dict[str, Any], metric: str, prompt_model: str) -> JudgeTemplate:
    """lalmeval's own prompts for `metric`: each variant's text for the prompt model, else its default."""
    variants = {}
    for variant, by_model in judge_prompts.get(metric, {}).items():
        text = by_model.get(prompt_model, by_model.get("default"))
        if text is not None:
            variants[variant] = Texts(None, text)
    scale = Scale(0, 1) if metric == BINARY_METRIC else Scale(0, 5)
    return JudgeTemplate(DEFAULT, scale, variants, multiply=100.0 / scale.high, stand_ins=True)


def _parse(raw: Any, where: str) -> TemplateSpec:
    if not isinstance(raw, dict):
        raise UserError(f"{where}: a judge template is a mapping with verdict, prompt (or variants) and optional system, fields, generation, score, history")
    try:
        return TemplateSpec.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])  # a misspelt key explains the missing one
        key = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            raise UserError(f"{where}: unknown key '{key}'{closest(key.split('.')[-1], TemplateSpec.model_fields)}") from None
        raise UserError(f"{where}: {key or 'template'}: {err['msg'].removeprefix('Value error, ')}") from None


@functools.cache
def shipped() -> dict[str, TemplateSpec]:
    """The published templates of judge_templates.yaml, by name (read once)."""
    raw = load_yaml(SHIPPED, "judge templates file") or {}
    return {name: _parse(entry, f"{SHIPPED}: {name}") for name, entry in raw.items()}


def names() -> list[str]:
    """Every template name a runspec may give."""
    return [DEFAULT, *shipped()]


def is_path(value: str) -> bool:
    """Whether a runspec's judge_template names a file rather than a template."""
    return value.endswith((".yaml", ".yml", ".json")) or "/" in value or "\\" in value


def resolve(value: str, metric: str, base: Path, judge_prompts: dict[str, Any], prompt_model: str) -> JudgeTemplate:
    """The template a runspec names (a name, or a file path relative to `base`) for `metric`."""
    if value == DEFAULT:
        return default_template(judge_prompts, metric, prompt_model)
    if is_path(value):
        path = (base / value).resolve()
        spec = _parse(load_yaml(path, "judge template file"), str(path))
        template = build(spec, spec.name or path.stem, str(path))
    elif value in shipped():
        template = build(shipped()[value], value, f"{SHIPPED}: {value}")
    else:
        raise UserError(f"unknown judge template '{value}'{closest(value, names())}; templates: {', '.join(names())}, "
                        "or a template file (.yaml) relative to the runspec")
    fits = BINARY_METRIC if template.binary else GRADED_METRIC
    if metric != fits:
        kind = f"gives a {template.verdict.describe()} verdict" if template.binary else f"rates on a {template.verdict.describe()} scale"
        raise UserError(f"judge template '{template.name}' {kind} and fits {fits}, not {metric}")
    return template


def _smart_round(value: float, digits: int) -> float:
    """round(value x 10^digits) / 10^digits, as AU-Harness's smart_round rounds its printed numbers."""
    return round(value * 10 ** digits) / 10 ** digits
