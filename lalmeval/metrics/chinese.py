"""The `chinese` normalizer (Mandarin and Cantonese): one script, one width, one form for numerals.

Convention (both sides of a comparison get it):

- Full-width forms fold to half-width (Unicode NFKC), case folds, bracketed asides go.
- Traditional characters become simplified ones with zhconv's `zh-hans` table: a character-level
  conversion, without zh-cn's regional vocabulary swaps (軟體 → 软体, not 软件), so Cantonese words
  and character counts stay as spoken.
- Numerals take their spoken, Chinese-character form, as SpeechColab's `cn_tn.py` text normalizer
  (SpeechIO leaderboard) writes them and as Qwen2-Audio's and Kimi-Audio-Evalkit's ASR scoring uses it:
  4-digit years before 年 are read digit by digit (2024年 → 二零二四年); other numbers as
  cardinals by cn2an (120 → 一百二十, 3.5 → 三点五, 50% → 百分之五十); digit strings with a leading
  zero or of 9+ digits (phone and id numbers) digit by digit. Characters are never turned into
  digits, so words such as 一起, 统一, 万一 are left alone. 〇 folds to 零 and 两 to 二
  (两百 = 200 = 二百, 两个 = 2个).
- Punctuation and symbols become spaces; Latin words stay words (scored as tokens in 'mixed' units).
"""

from __future__ import annotations

import re
import unicodedata

import regex

from lalmeval.metrics.normalize import NORMALIZERS, Normalizer

_BRACKETS = re.compile(r"[<\[][^>\]]*[>\]]|\([^)]*\)")  # after NFKC, so full-width brackets too
_DIGITS = "零一二三四五六七八九"
_GROUPED = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%")
_YEAR = re.compile(r"(?<![\d.])(\d{4})(?=年)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SYMBOLS = regex.compile(r"[\p{P}\p{S}]+")


def _digit_by_digit(digits: str) -> str:
    return "".join(_DIGITS[int(d)] for d in digits)


def _cardinal(number: str) -> str:
    """120 → 一百二十, 3.5 → 三点五; leading-zero and 9+ digit strings are read digit by digit."""
    whole = number.split(".")[0]
    if (len(whole) > 1 and whole.startswith("0")) or len(whole) >= 9:
        return "点".join(_digit_by_digit(part) for part in number.split("."))
    import cn2an

    return cn2an.an2cn(number, "low")


def spoken_numerals(text: str) -> str:
    """Arabic numerals (after NFKC) in their spoken Chinese form; see the module docstring."""
    text = _GROUPED.sub("", text)
    text = _PERCENT.sub(lambda m: "百分之" + _cardinal(m.group(1)), text)
    text = _YEAR.sub(lambda m: _digit_by_digit(m.group(1)), text)
    text = _NUMBER.sub(lambda m: _cardinal(m.group(0)), text)
    return text.replace("〇", "零").replace("两", "二")


@NORMALIZERS.register("chinese")
class Chinese(Normalizer):
    """Simplified script, half-width, spoken-form numerals, no punctuation (Mandarin and Cantonese)."""

    convention = ("zhconv zh-hans (traditional → simplified), NFKC (full-width → half-width), numerals in spoken "
                  "Chinese form as SpeechColab's cn_tn text normalizer writes them (used by Qwen2-Audio's and "
                  "Kimi-Audio-Evalkit's ASR scoring), via cn2an")

    def __call__(self, text: str) -> str:
        import zhconv

        text = unicodedata.normalize("NFKC", text).lower()
        text = _BRACKETS.sub(" ", text)
        text = zhconv.convert(text, "zh-hans")
        text = spoken_numerals(text)
        return " ".join(_SYMBOLS.sub(" ", text).split())
