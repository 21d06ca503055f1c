"""The ASR scoring Kimi-Audio-Evalkit and lmms-eval share: the `kimi` and `lmms` normalizers.

Both harnesses score speech recognition the way Qwen2-Audio's evaluation does (Kimi calls its
method `qwen2-audio-impl`), each with its own tokenizer. For one dataset of language L:

1. Markup and spacing: `<|…|>` tags become spaces, whitespace runs one space, a space before
   `! , . ? ; :` goes, leading spaces go; for Mandarin every space goes ("用 Python 写代码" →
   "用Python写代码": a Latin phrase inside Chinese becomes one word).
2. By language. Mandarin (zh): SpeechIO's text normalization (`speechio_tn`: numbers, dates, money,
   fractions, percentages in spoken Chinese, punctuation to spaces; traditional characters and case
   stay as written). Cantonese (yue): zhconv `zh-cn` (traditional → simplified with mainland word
   choices), then Whisper's basic normalizer. English (en): openai-whisper's English normalizer,
   then Whisper's basic normalizer (which splits what the English one keeps: `$`, `%`, decimal
   points, apostrophes). Any other language: Whisper's basic normalizer.
3. Tokens. `kimi`: sacrebleu's `zh` tokenizer (each CJK character a token, other runs tokenized as
   mteval-13a: ASCII punctuation split off). `lmms`: whitespace. Tokens made only of punctuation
   are dropped, the rest lower-cased. lmms-eval counts characters for Mandarin and Cantonese.
4. Error rate: Σ Levenshtein distance / Σ reference tokens (as `word_error_rate` computes it).

Unit `character` counts the characters of these tokens; `word` and `mixed` count the tokens.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, ClassVar

from lalmeval.metrics import speechio_tn
from lalmeval.metrics.normalize import NORMALIZERS, Normalizer, openai_whisper_english

_TAG = re.compile(r"<\|.*?\|>")
_SPACE_BEFORE_PUNCT = re.compile(r" ?([!,.?;:])")
_WHITESPACE = re.compile(r"\s+")

# sacrebleu's table of "Chinese" characters (tokenizer_zh.py) as Python compares the strings it is
# written with: two entries have five hex digits after \u, read as a 4-digit escape plus a digit,
# so they cover U+2001–U+2A6D (punctuation, currency, arrows, maths …) and U+2F81–U+2FA1 instead
# of CJK Extension B and its compatibility supplement.
_CJK_RANGES = ((0x3400, 0x4DB5), (0x4E00, 0x9FA5), (0x9FA6, 0x9FBB), (0xF900, 0xFA2D), (0xFA30, 0xFA6A), (0xFA70, 0xFAD9),
               (0x2001, 0x2A6D), (0x2F81, 0x2FA1), (0xFF00, 0xFFEF), (0x2E80, 0x2EFF), (0x3000, 0x303F), (0x31C0, 0x31EF),
               (0x2F00, 0x2FDF), (0x2FF0, 0x2FFF), (0x3100, 0x312F), (0x31A0, 0x31BF), (0xFE10, 0xFE1F), (0xFE30, 0xFE4F),
               (0x2600, 0x26FF), (0x2700, 0x27BF), (0x3200, 0x32FF), (0x3300, 0x33FF))
_CJK = re.compile("([" + "".join(f"\\u{start:04x}-\\u{end:04x}" for start, end in _CJK_RANGES) + "])")
# mteval-13a's rules as sacrebleu applies them after the CJK split.
_MTEVAL = (
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),  # ASCII punctuation but ' , - .
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),                # . and , unless after a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),                # ... or before one
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),                     # - after a digit
)


def sacrebleu_zh(text: str) -> list[str]:
    """Tokens of sacrebleu's `zh` tokenizer: CJK characters one by one, the rest by mteval-13a's rules."""
    text = _CJK.sub(r" \1 ", text.strip())
    for pattern, replacement in _MTEVAL:
        text = pattern.sub(replacement, text)
    return text.split()


def _punctuation_only(token: str) -> bool:
    return all(unicodedata.category(ch)[0] == "P" for ch in token)


def _basic() -> Callable[[str], str]:
    from whisper_normalizer.basic import BasicTextNormalizer

    return BasicTextNormalizer()  # openai-whisper's, combining marks removed


def _cantonese() -> Callable[[str], str]:
    import zhconv

    basic = _basic()
    return lambda text: basic(zhconv.convert(text, "zh-cn"))


def _english() -> Callable[[str], str]:
    english, basic = openai_whisper_english(), _basic()
    return lambda text: basic(english(text))


_BY_LANGUAGE: dict[str, Callable[[], Callable[[str], str]]] = {
    "zh": lambda: speechio_tn.normalize, "yue": _cantonese, "en": _english,
}


class QwenAsrScoring(Normalizer):
    """Markup and spacing, the language's normalizer, then the harness's tokenizer (see the module docstring)."""

    split_cjk: ClassVar[bool] = True

    def __init__(self, language: str = "") -> None:
        super().__init__(language)
        self._normalize = _BY_LANGUAGE.get(language, _basic)()

    def _tokens(self, text: str) -> list[str]:
        text = _SPACE_BEFORE_PUNCT.sub(r"\1", _WHITESPACE.sub(" ", _TAG.sub(" ", text))).lstrip(" ")
        if self.language == "zh":
            text = _WHITESPACE.sub("", text)
        text = self._normalize(text)
        raw = sacrebleu_zh(text) if self.split_cjk else text.split(" ")
        return " ".join(t for t in raw if not _punctuation_only(t)).lower().split()

    def __call__(self, text: str) -> str:
        return " ".join(self._tokens(text))

    def tokens(self, text: str, unit: str) -> list[str]:
        found = self._tokens(text)
        return list("".join(found)) if unit == "character" else found


@NORMALIZERS.register("kimi")
class Kimi(QwenAsrScoring):
    """Kimi-Audio-Evalkit's ASR scoring for the dataset's language; sacrebleu `zh` tokens."""

    convention = ("Kimi-Audio-Evalkit almeval/metrics/wer.py compute_wer and almeval/datasets/ds_asr.py remove_sp "
                  "(github.com/MoonshotAI/Kimi-Audio-Evalkit @ 4080c492): SpeechIO cn_tn for Mandarin, zhconv zh-cn + "
                  "Whisper basic for Cantonese, openai-whisper English + basic for English, sacrebleu zh tokenizer")


@NORMALIZERS.register("lmms")
class Lmms(QwenAsrScoring):
    """lmms-eval's ASR scoring for the dataset's language; whitespace tokens (characters for zh/yue by unit)."""

    split_cjk = False
    empty_reference_tokens = 0  # compute_wer adds the hypothesis tokens to the distance and nothing to the length
    convention = ("lmms-eval lmms_eval/tasks/asr_wer_utils.py compute_wer with librispeech/utils.py's settings "
                  "(github.com/EvolvingLMMs-Lab/lmms-eval @ 75571cfe): SpeechIO cn_tn for Mandarin, zhconv zh-cn + "
                  "Whisper basic for Cantonese, openai-whisper English + basic for English, whitespace tokens")


@NORMALIZERS.register("lmms_english_only")
class LmmsEnglishOnly(Lmms):
    """lmms-eval's gigaspeech scoring: as `lmms`, but English texts get openai-whisper's English rules alone (no basic pass)."""

    convention = ("lmms-eval lmms_eval/tasks/gigaspeech/utils.py compute_wer (github.com/EvolvingLMMs-Lab/lmms-eval, "
                  "v0.3.0 @ 754640a7 and @ 75571cfe alike): openai-whisper English normalizer only, whitespace tokens; "
                  "its other English tasks (librispeech, common_voice_15, tedlium, people_speech) add Whisper's basic normalizer")

    def __init__(self, language: str = "") -> None:
        super().__init__(language)
        if language == "en":
            self._normalize = openai_whisper_english()
