"""AU-Harness's word error rate scoring as its runs apply it: the `au_harness` normalizer.

github.com/ServiceNow/AU-Harness @ daa06166 builds its metrics with `utils/metric_utils.py`
load_metric, which passes the task's language only to metrics whose name contains "wer". Its
metric is named `word_error_rate`, so `WERMetrics()` keeps its default language, English, for
every task. Every number an AU-Harness run prints (WER, and BLEU and METEOR, which call the same
`normalize_text` with its English default) therefore normalizes every language as English
(`metrics/word_error_rate_metrics.py` normalize_text, `utils/constants.py`):

1. Unicode NFC.
2. Every run of digits spelled out in English by num2words ("我明天下午3点" → "我明天下午three点").
3. openai-whisper's English normalizer, vendored by AU-Harness (English fillers such as "um" and
   "uh" are deleted in every language, so German "um" goes; spelled numbers become digits again).
4. Lower case, every Unicode punctuation character deleted (jiwer RemovePunctuation), stripped.
5. Words: split at spaces (jiwer's default), for every language: a Chinese sentence written
   without spaces is one word, and Japanese is scored by words too (its character error rate is
   only reached through WERMetrics("ja"), which no run builds).

This is that peer's behaviour, reproduced so its printed numbers can be compared with; lalmeval's
own scoring (protocol `lalmeval`) normalizes each language by its own rules.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable

from lalmeval.metrics.normalize import NORMALIZERS, Normalizer, openai_whisper_english

_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s\s+")
RUN_LANGUAGE = "en"  # what load_metric leaves WERMetrics with, whatever the task's language


def spell_digits(text: str, language: str = RUN_LANGUAGE) -> str:
    """Digit runs as num2words writes them in `language`; the text unchanged if any of them fails."""
    from num2words import num2words

    try:
        return _DIGITS.sub(lambda m: num2words(int(m.group()), lang=language), text)
    except Exception:  # noqa: BLE001 - AU-Harness keeps the text as it was on any failure
        return text


def au_harness_text(text: str, rules: Callable[[str], str]) -> str:
    """`text` as AU-Harness's normalize_text(text) leaves it under `rules` (its English normalizer)."""
    text = rules(spell_digits(unicodedata.normalize("NFC", text))).lower()
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("P")).strip()


@NORMALIZERS.register("au_harness")
class AuHarness(Normalizer):
    """AU-Harness's normalization as its runs apply it: English rules for every language (see the module docstring)."""

    convention = ("AU-Harness metrics/word_error_rate_metrics.py normalize_text as utils/metric_utils.py load_metric leaves it "
                  "(github.com/ServiceNow/AU-Harness @ daa06166): language 'en' for every task; NFC, English num2words, "
                  "openai-whisper English normalizer, jiwer ToLowerCase + RemovePunctuation + Strip, words")

    empty_reference_tokens = 1  # compute_record_level_scores: every candidate word incorrect, out of a total of 1

    def __init__(self, language: str = "") -> None:
        super().__init__(language)
        import num2words  # noqa: F401  (a missing package stops the run at start, see normalize.require)

        self._rules: Callable[[str], str] = openai_whisper_english()

    def __call__(self, text: str) -> str:
        return au_harness_text(text, self._rules)

    def tokens(self, text: str, unit: str) -> list[str]:
        normalized = self(text)
        if unit == "character":
            return [ch for ch in normalized if not ch.isspace()]
        return [w for w in _SPACES.sub(" ", normalized).strip().split(" ") if w]
