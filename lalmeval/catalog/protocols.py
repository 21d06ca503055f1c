"""Scoring protocols: named, versioned conventions a runspec picks with `protocol:`.

The same replies score differently under different harnesses' conventions (Kimi-Audio-Evalkit
reads 1/3 as 三分之一 and spaces nothing in Mandarin; the Open ASR Leaderboard merges "white
paper" with "whitepaper"; AU-Harness scores Chinese by words). A protocol names one convention and
presets the runspec fields that carry it — the normalizer and error unit, by language — before
the runspec's own fields, which win. Scores print the protocol and what was actually used
(`details.protocol`, results.csv/.md, report.html).

Adding a protocol is one `register(ScoringProtocol(...))` below: a name, a version (bump it when
the convention's numbers change), where it is defined, and the fields it presets per language
(any runspec field: `normalizer`, `error_unit`, `instruction`, `generation_kwargs`, …). A peer's protocol
presets `reading: verbatim`: the peers score the reply as it is, and so their numbers stay theirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from lalmeval.errors import UserError
from lalmeval.registry import Registry

Presets = Callable[[str], Optional[Mapping[str, Any]]]  # ISO language → runspec fields; None: not defined for it


@dataclass(frozen=True)
class ScoringProtocol:
    """A named, versioned scoring convention and the runspec fields it presets for each language."""

    name: str
    version: str
    summary: str
    source: str
    presets: Presets = field(repr=False)

    @property
    def label(self) -> str:
        """'name@version', as scores print it."""
        return f"{self.name}@{self.version}"

    def fields(self, language: str) -> Mapping[str, Any]:
        """The runspec fields this protocol presets for a dataset in `language` (UserError when it has no convention for it)."""
        found = self.presets(language)
        if found is None:
            raise UserError(f"protocol '{self.name}' has no convention for language '{language}': {self.summary}")
        return found


SCORING_PROTOCOLS: Registry[ScoringProtocol] = Registry("protocol")


def register(protocol: ScoringProtocol) -> ScoringProtocol:
    """Make `protocol` available to runspecs under its name."""
    return SCORING_PROTOCOLS.register(protocol.name)(protocol)


def resolve(name: str, where: str) -> ScoringProtocol:
    """The protocol `name` or `name@version` denotes; an unknown name or another version is a UserError naming `where`."""
    base, _, version = name.partition("@")
    protocol = SCORING_PROTOCOLS.get(base, where=where)
    if version and version != protocol.version:
        raise UserError(f"{where}: protocol '{base}' is version {protocol.version} here, not {version}: "
                        f"its numbers may differ from the ones you mean to compare with")
    return protocol


def _by_unit(normalizer: str, characters: frozenset[str] = frozenset(), mixed: frozenset[str] = frozenset()) -> Presets:
    """One normalizer for every language; characters / mixed units for the languages named, words otherwise."""
    def presets(language: str) -> Mapping[str, Any]:
        unit = "character" if language in characters else "mixed" if language in mixed else "word"
        return {"normalizer": normalizer, "error_unit": unit, "reading": "verbatim"}
    return presets


# lalmeval presets nothing: each metric picks its defaults by the language of the texts it scores
# (rouge and bleu by the target language of a translation, see lalmeval.config.languages).
register(ScoringProtocol(
    "lalmeval", "2", "lalmeval's own defaults: whisper_english for English, chinese for Mandarin and Cantonese, basic "
    "otherwise; mixed units for zh/yue, characters for ja/ko/th/lo/my/km, words otherwise; replies read carefully "
    "(version 2: docs/reading.md)",
    "this repository (README, Metrics)",
    lambda language: {},
))
register(ScoringProtocol(
    "kimi", "1", "Kimi-Audio-Evalkit's ASR scoring (normalizer kimi): SpeechIO text normalization for Mandarin, "
    "zhconv + Whisper basic for Cantonese, openai-whisper English + basic for English; sacrebleu zh tokens",
    "github.com/MoonshotAI/Kimi-Audio-Evalkit @ 4080c492: almeval/metrics/wer.py, almeval/datasets/ds_asr.py",
    _by_unit("kimi", mixed=frozenset({"zh", "yue"})),
))
register(ScoringProtocol(
    "lmms", "1", "lmms-eval's ASR scoring (normalizer lmms): as Kimi's but whitespace tokens, characters for Mandarin and Cantonese",
    "github.com/EvolvingLMMs-Lab/lmms-eval @ 75571cfe: lmms_eval/tasks/asr_wer_utils.py, lmms_eval/tasks/librispeech/utils.py",
    _by_unit("lmms", characters=frozenset({"zh", "yue"})),
))
# lmms-eval v0.3.0 (tag v0.3.0 @ 754640a7), for the entries that reproduce that release: its English ASR task
# gigaspeech applies openai-whisper's English normalizer alone, which is what English presets here; the
# v0.3 entries of librispeech, common_voice_15, tedlium and people_speech set `normalizer: lmms`, as
# those tasks also apply Whisper's basic normalizer (in v0.3.0 as today). Other languages score as `lmms`.
register(ScoringProtocol(
    "lmms_v0.3", "1", "lmms-eval v0.3.0's ASR scoring: English with openai-whisper's English normalizer alone "
    "(normalizer lmms_english_only), whitespace tokens; otherwise as lmms (characters for Mandarin and Cantonese)",
    "github.com/EvolvingLMMs-Lab/lmms-eval @ v0.3.0 (754640a7): lmms_eval/tasks/gigaspeech/utils.py, lmms_eval/tasks/librispeech/utils.py",
    lambda language: {"normalizer": "lmms_english_only", "error_unit": "word", "reading": "verbatim"} if language == "en"
    else _by_unit("lmms", characters=frozenset({"zh", "yue"}))(language),
))
register(ScoringProtocol(
    "open_asr", "1", "the Open ASR Leaderboard's English scoring (normalizer open_asr: its normalizer, compounds merged "
    "in the alignment); English only",
    "github.com/huggingface/open_asr_leaderboard @ d1e99b25: normalizer/normalizer.py, normalizer/eval_utils.py",
    lambda language: {"normalizer": "open_asr", "error_unit": "word", "reading": "verbatim"} if language == "en" else None,
))
# AU-Harness's runs score every language with its English rules (load_metric gives WERMetrics no
# language, see lalmeval/metrics/au_harness.py): version 2 follows that run path, where version 1
# followed WERMetrics(language), which no AU-Harness run builds.
register(ScoringProtocol(
    "au_harness", "2", "AU-Harness's scoring as its runs print it (normalizer au_harness): every language normalized as "
    "English (English num2words, openai-whisper English normalizer, punctuation deleted) and scored by words; "
    "BLEU and METEOR on the same normalized text",
    "github.com/ServiceNow/AU-Harness @ daa06166: utils/metric_utils.py load_metric, metrics/word_error_rate_metrics.py, "
    "metrics/bleu_metrics.py, metrics/meteor_score.py, utils/constants.py",
    lambda language: {"normalizer": "au_harness", "error_unit": "word", "reading": "verbatim"},
))
