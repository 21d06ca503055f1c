"""The texts a peer's run hands to BLEU and METEOR, by scoring protocol: the step that makes its numbers differ from lalmeval's.

lalmeval scores BLEU on the texts as written (sacrebleu's tokenizer for the target language) and
METEOR on nltk's word tokens. The peers normalize first, so their printed numbers differ:

- AU-Harness (`au_harness`; metrics/bleu_metrics.py, metrics/meteor_score.py @ daa06166): both call
  its word error rate's `normalize_text` with its English default (see metrics/au_harness.py), then
  sacrebleu's corpus BLEU with tokenizer 13a (`zh` for a covost2 task whose last name part holds
  "zh"), and METEOR on `str.split()` tokens, each sample's METEOR rounded to 3 decimals.
- lmms-eval (`lmms`, `lmms_v0.3`; lmms_eval/tasks/covost2/utils.py): markup and spacing cleaned as
  for ASR, then for an English target openai-whisper's English normalizer, for a Chinese target
  SpeechIO's normalizer and sacrebleu's `zh` tokens; tokens made only of punctuation dropped, lower
  case; corpus BLEU with 13a (English) or zh (Chinese).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Optional

from lalmeval.catalog.runspecs import Dataset

_TAG = re.compile(r"<\|.*?\|>")
_SPACE_BEFORE_PUNCT = re.compile(r" ?([!,.?;:])")
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class PeerText:
    """How one peer prepares texts for BLEU and METEOR, and what that changes against lalmeval's own scoring."""

    peer: str
    prepare: Callable[[str, Dataset], str]
    bleu_tokenizer: Callable[[Dataset], str]
    meteor_rounding: Optional[int]  # each sample's METEOR rounded to this many decimals before the mean
    step: str


@functools.lru_cache(maxsize=None)
def _au_rules() -> Callable[[str], str]:
    from lalmeval.metrics.normalize import openai_whisper_english

    return openai_whisper_english()


def _au_prepare(text: str, dataset: Dataset) -> str:
    from lalmeval.metrics.au_harness import au_harness_text

    return au_harness_text(text, _au_rules())


def _task(dataset: Dataset) -> str:
    """The peer's task name the entry reproduces (the dataset's name when it names none)."""
    return (dataset.spec.reproduces or "").partition(":")[2] or dataset.name


def _au_tokenizer(dataset: Dataset) -> str:
    task = _task(dataset)
    return "zh" if "covost2" in task and "zh" in task.split("_")[-1] else "13a"


def _lmms_chinese(dataset: Dataset) -> bool:
    return dataset.iso_target_language in ("zh", "yue")


def _without_punctuation_tokens(tokens: list[str]) -> str:
    return " ".join(t for t in tokens if not all(unicodedata.category(c).startswith("P") for c in t))


def _lmms_prepare(text: str, dataset: Dataset) -> str:
    from lalmeval.metrics import speechio_tn
    from lalmeval.metrics.qwen_asr import sacrebleu_zh

    text = _SPACE_BEFORE_PUNCT.sub(r"\1", _WHITESPACE.sub(" ", _TAG.sub(" ", text))).lstrip(" ")
    if _lmms_chinese(dataset):
        return _without_punctuation_tokens(sacrebleu_zh(speechio_tn.normalize(text))).lower()
    return _without_punctuation_tokens(_lmms_english()(text).split(" ")).lower()


@functools.lru_cache(maxsize=None)
def _lmms_english() -> Callable[[str], str]:
    from lalmeval.metrics.normalize import openai_whisper_english

    return openai_whisper_english()


_AU = PeerText("AU-Harness", _au_prepare, _au_tokenizer, 3,
               "AU-Harness normalizes both texts as English before scoring (num2words, Whisper's English normalizer, "
               "punctuation deleted) and METEOR splits at spaces; lalmeval scores the texts as written")
_LMMS = PeerText("lmms-eval", _lmms_prepare, lambda d: "zh" if _lmms_chinese(d) else "13a", None,
                 "lmms-eval normalizes both texts before BLEU (Whisper's English normalizer or SpeechIO's Chinese one, "
                 "punctuation tokens dropped, lower case); lalmeval scores the texts as written")
PEER_TEXT: dict[str, PeerText] = {"au_harness": _AU, "lmms": _LMMS, "lmms_v0.3": _LMMS}


def peer_text(dataset: Dataset) -> Optional[PeerText]:
    """The peer text rules of the dataset's protocol (None under lalmeval's own and protocols without any)."""
    return PEER_TEXT.get(dataset.spec.protocol.partition("@")[0])


def au_round(value: float, digits: int) -> float:
    """AU-Harness's smart_round: round(value * 10**digits) / 10**digits."""
    return round(value * 10 ** digits) / 10 ** digits


# Who prints the numbers of each peer protocol (a protocol not named here is lalmeval's own).
PEERS = {"au_harness": "AU-Harness", "lmms": "lmms-eval", "lmms_v0.3": "lmms-eval v0.3.0", "kimi": "Kimi-Audio-Evalkit",
         "open_asr": "the Open ASR Leaderboard"}


def peer_name(dataset: Dataset) -> Optional[str]:
    """The harness whose printed numbers the dataset's protocol reproduces (None under lalmeval's own)."""
    return PEERS.get(dataset.spec.protocol.partition("@")[0])


def side_by_side(rules: PeerText | str, peer_score: Optional[float], own_score: Optional[float], step: str = "") -> dict:
    """details["lalmeval"]: lalmeval's own number beside the peer's, and the step that separates them when they differ."""
    peer, step = (rules.peer, rules.step) if isinstance(rules, PeerText) else (rules, step)
    differs = peer_score is not None and own_score is not None and round(peer_score, 2) != round(own_score, 2)
    return {"score": own_score, "score_is": f"as {peer} prints it", "differs_by": step if differs else None}
