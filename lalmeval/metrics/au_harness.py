"""AU-Harness's word error rate scoring: the `au_harness` normalizer.

As github.com/ServiceNow/AU-Harness @ daa06166 scores `word_error_rate` (`metrics/
word_error_rate_metrics.py` normalize_text, `utils/constants.py`), for a task of language L:

1. Unicode NFC.
2. Every run of digits spelled out with num2words in L ("25" → "twenty-five"); when num2words
   has no L (Chinese, Cantonese …) or fails on any number, the text is left as it was.
3. English: openai-whisper's English normalizer (which turns the spelled numbers back into
   digits); every other language: Whisper's basic normalizer.
4. Lower case, every Unicode punctuation character deleted (jiwer RemovePunctuation), stripped.
5. Words: split at spaces (jiwer's default). Chinese and Cantonese too: AU-Harness scores them
   by words, so a sentence written without spaces is one word.

AU-Harness's Japanese character error rate cannot run with the jiwer it pins (4.0.0 rejects its
`truth_transform` argument), so there is no AU-Harness number to reproduce: Japanese is refused.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable

from lalmeval.metrics.normalize import NORMALIZERS, Normalizer, NotSupported, openai_whisper_english

_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s\s+")


def spell_digits(text: str, language: str) -> str:
    """Digit runs as num2words writes them in `language`; the text unchanged if any of them fails."""
    from num2words import num2words

    try:
        return _DIGITS.sub(lambda m: num2words(int(m.group()), lang=language), text)
    except Exception:  # noqa: BLE001 - AU-Harness keeps the text as it was on any failure, unknown languages included
        return text


@NORMALIZERS.register("au_harness")
class AuHarness(Normalizer):
    """AU-Harness's word error rate normalization for the dataset's language (see the module docstring)."""

    convention = ("AU-Harness metrics/word_error_rate_metrics.py normalize_text (github.com/ServiceNow/AU-Harness @ daa06166): "
                  "NFC, num2words, openai-whisper English or basic normalizer, jiwer ToLowerCase + RemovePunctuation + Strip")

    def __init__(self, language: str = "") -> None:
        super().__init__(language)
        if language == "ja":
            raise NotSupported("AU-Harness's Japanese character error rate does not run with the jiwer it pins "
                               "(process_words rejects truth_transform), so it has no number to reproduce; use normalizer kimi, lmms or basic")
        import num2words  # noqa: F401  (a missing package stops the run at start, see normalize.require)

        self._rules: Callable[[str], str] = openai_whisper_english() if language == "en" else _whisper_basic()

    def __call__(self, text: str) -> str:
        text = spell_digits(unicodedata.normalize("NFC", text), self.language) if self.language else text
        text = self._rules(text).lower()
        return "".join(ch for ch in text if not unicodedata.category(ch).startswith("P")).strip()

    def tokens(self, text: str, unit: str) -> list[str]:
        normalized = self(text)
        if unit == "character":
            return [ch for ch in normalized if not ch.isspace()]
        return [w for w in _SPACES.sub(" ", normalized).strip().split(" ") if w]


def _whisper_basic() -> Callable[[str], str]:
    from whisper_normalizer.basic import BasicTextNormalizer

    return BasicTextNormalizer()
