"""Text normalizers for error rates, by name, and the units error rates count.

A runspec picks one with `normalizer:` (default by language, see `lalmeval.languages`); adding one
is a `Normalizer` subclass with `@NORMALIZERS.register("name")`.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import regex

from lalmeval.errors import UserError
from lalmeval.registry import Registry


class Normalizer:
    """Maps a text to the form error rates compare; `convention` says which published rules it follows."""

    convention: ClassVar[str] = ""

    def __call__(self, text: str) -> str:
        raise NotImplementedError


NORMALIZERS: Registry[type[Normalizer]] = Registry("normalizer")


@functools.lru_cache(maxsize=None)
def normalizer(name: str) -> Normalizer:
    """The one shared instance of a registered normalizer (they hold no state between calls)."""
    return NORMALIZERS.get(name)()


def require(name: str, where: str) -> None:
    """Build normalizer `name` now, so that a missing package stops the run at start (UserError naming `where`)."""
    try:
        normalizer(name)
    except ImportError as exc:
        raise UserError(f"{where}: normalizer '{name}' needs the '{exc.name}' package: pip install -r requirements.txt") from None


@NORMALIZERS.register("whisper_english")
class WhisperEnglish(Normalizer):
    """Whisper's English normalizer: case, brackets, fillers, contractions, titles, numbers, currency, British spellings."""

    convention = ("Whisper EnglishTextNormalizer (Radford et al. 2022, 'Robust Speech Recognition via Large-Scale "
                  "Weak Supervision', appendix C), from the whisper-normalizer package")

    def __init__(self) -> None:
        from whisper_normalizer.english import EnglishTextNormalizer

        self._normalize = EnglishTextNormalizer()

    def __call__(self, text: str) -> str:
        return self._normalize(text).strip()


@NORMALIZERS.register("whisper_basic")
class WhisperBasic(Normalizer):
    """Whisper's BasicTextNormalizer exactly as in the paper: also drops combining marks (vowel signs, viramas)."""

    convention = "Whisper BasicTextNormalizer (Radford et al. 2022, appendix C), from the whisper-normalizer package"

    def __init__(self) -> None:
        from whisper_normalizer.basic import BasicTextNormalizer

        self._normalize = BasicTextNormalizer()

    def __call__(self, text: str) -> str:
        return self._normalize(text).strip()


@NORMALIZERS.register("basic")
class Basic(Normalizer):
    """Whisper's BasicTextNormalizer keeping combining marks: NFKC, case, brackets, punctuation and symbols."""

    convention = ("Whisper BasicTextNormalizer with preserve_marks=True (whisper-normalizer package), so that "
                  "Thai, Indic and other scripts keep their vowel signs")

    def __init__(self) -> None:
        from whisper_normalizer.basic import BasicTextNormalizer

        self._normalize = BasicTextNormalizer(preserve_marks=True)

    def __call__(self, text: str) -> str:
        return self._normalize(text).strip()


@NORMALIZERS.register("none")
class Identity(Normalizer):
    """No normalization: the texts are compared as written (split into units only)."""

    convention = "none"

    def __call__(self, text: str) -> str:
        return text


def normalize_basic(text: str) -> str:
    """The `basic` normalizer as a function."""
    return normalizer("basic")(text)


# Scripts written without spaces between words: in 'mixed' units each of their characters is a token.
_UNSPACED = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Myanmar}\p{Khmer}"
_MIXED = regex.compile(rf"[{_UNSPACED}]|[^\s{_UNSPACED}]+")
UNITS = ("word", "character", "mixed")


def split_units(text: str, unit: str) -> list[str]:
    """Tokens of a normalized text: words, characters (spaces dropped), or mixed (CJK characters and other words)."""
    if unit == "word":
        return text.split()
    if unit == "character":
        return [ch for ch in text if not ch.isspace()]
    if unit == "mixed":
        return _MIXED.findall(text)
    raise ValueError(f"unknown error unit '{unit}'")

