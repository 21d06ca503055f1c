"""Text normalizers for error rates, by name, and the units error rates count.

A runspec picks one with `normalizer:` (default by language, see `lalmeval.config.languages`); adding one
is a `Normalizer` subclass with `@NORMALIZERS.register("name")`. A normalizer is built for the
dataset's language (a convention such as Kimi-Audio-Evalkit's scores each language its own way)
and turns a text into the tokens an error rate counts: by default its normalized text split into
the dataset's error unit; a convention with its own tokenizer overrides `tokens`.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any, ClassVar, Optional

import regex

from lalmeval.errors import UserError
from lalmeval.registry import Registry


class Normalizer:
    """Maps a text to the form error rates compare; `convention` says which published rules it follows."""

    convention: ClassVar[str] = ""
    # Alignment joins words split in one text and written as one in the other at no cost
    # ("white paper" = "whitepaper"), as the Open ASR Leaderboard scores; else plain Levenshtein.
    merge_compounds: ClassVar[bool] = False
    # A reference that says something but that the rules turn into nothing: lalmeval leaves the sample unscored;
    # a peer's convention may score it (its every hypothesis token an error) against this many reference tokens.
    empty_reference_tokens: ClassVar[Optional[int]] = None
    language: str = ""  # ISO code of the texts; a normalizer whose rules depend on it takes it in __init__
    # The same text always gives the same tokens, so `units_of` may reuse them; a normalizer whose output
    # depends on anything but the text (a counter, the clock) sets this False.
    pure: ClassVar[bool] = True

    def __init__(self, language: str = "") -> None:
        self.language = language

    def __call__(self, text: str) -> str:
        raise NotImplementedError

    def tokens(self, text: str, unit: str) -> list[str]:
        """The units of `text` an error rate counts: the normalized text split into `unit`s."""
        return split_units(self(text), unit)


NORMALIZERS: Registry[type[Normalizer]] = Registry("normalizer")


# The normalizers' bracket rules (`[<\[][^>\]]*[>\]]`, `\(([^)]+?)\)`, `<\|.*?\|>`) scan from every opening bracket
# to its close, and `\s+'` from every space to the end of its run: on a degenerate reply of brackets that never
# close, or of a long run of spaces, that is quadratic (a 100 000-character "[[[[…" took minutes, a megabyte
# hours). Texts longer than LINEAR_FROM are first made harmless without changing what the rules make of them:
# whitespace runs are cut to SPACE_RUN characters (the rules treat any run alike), and when more than
# UNCLOSED_MAX brackets never close, those become spaces (what the rules turn brackets into anyway).
LINEAR_FROM = 2000
SPACE_RUN = 64
UNCLOSED_MAX = 32
_LONG_SPACE = re.compile(r"\s{%d,}" % (SPACE_RUN + 1))


def _unclosed(text: str) -> list[int]:
    """Positions of brackets that no closing one follows: `[` or `<` after the last `]` or `>`, `(` after the
    last `)`, and the `<` of `<|` after the last `|>`."""
    last_square, last_round, last_tag = max(text.rfind("]"), text.rfind(">")), text.rfind(")"), text.rfind("|>")
    found = [i for i in range(last_square + 1, len(text)) if text[i] in "[<"]
    found += [i for i in range(last_round + 1, len(text)) if text[i] == "("]
    found += [i for i in range(last_tag + 1, len(text) - 1) if text[i] == "<" and text[i + 1] == "|"]
    return found


def defused(text: str) -> str:
    """`text` in a form every normalizer reads in linear time and turns into the same tokens (see LINEAR_FROM)."""
    if len(text) < LINEAR_FROM:
        return text
    unclosed = _unclosed(text)
    if len(unclosed) > UNCLOSED_MAX:
        chars = list(text)
        for i in unclosed:
            chars[i] = " "
        text = "".join(chars)
    return _LONG_SPACE.sub(lambda run: run.group(0)[:SPACE_RUN], text)


# A reference is normalized once for every model that answers it, and a reply that repeats the reference (a
# correct transcript) or another reply is normalized again: the tokens of recent texts are kept, for texts up
# to CACHED_CHARS long (longer ones seldom repeat, and tokens take room: 9.5 MB for 2048 texts of 300 characters),
# CACHED_TEXTS of them at most.
CACHED_TEXTS = 2048
CACHED_CHARS = 300


def units_of(rules: Normalizer, text: str, unit: str) -> list[str]:
    """The units an error rate counts in `text` under `rules`, in time linear in the text (see `defused`)."""
    if len(text) > CACHED_CHARS or not rules.pure:
        return _units(rules, text, unit)
    return list(_recent_units(rules, text, unit))  # a fresh list: a caller may change what it gets


def _units(rules: Normalizer, text: str, unit: str) -> list[str]:
    return rules.tokens(text if isinstance(rules, Identity) else defused(text), unit)


@functools.lru_cache(maxsize=CACHED_TEXTS)
def _recent_units(rules: Normalizer, text: str, unit: str) -> tuple[str, ...]:
    """`_units`, kept for the CACHED_TEXTS texts used last (the cache is thread-safe; scoring runs in threads)."""
    return tuple(_units(rules, text, unit))


class NotSupported(ValueError):
    """A normalizer that has no convention for this language (raised when it is built; the message says why)."""


@functools.lru_cache(maxsize=None)
def normalizer(name: str, language: str = "") -> Normalizer:
    """The one shared instance of a registered normalizer for a language (they hold no state between calls)."""
    cls = NORMALIZERS.get(name)
    return cls(language) if "language" in inspect.signature(cls.__init__).parameters else cls()


def require(name: str, where: str, language: str = "") -> None:
    """Build normalizer `name` now, so that a missing package stops the run at start (UserError naming `where`)."""
    try:
        normalizer(name, language)
    except ImportError as exc:
        raise UserError(f"{where}: normalizer '{name}' needs the '{exc.name}' package: pip install -r requirements.txt") from None
    except NotSupported as exc:
        raise UserError(f"{where}: normalizer '{name}' for language '{language}': {exc}") from None


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


# Contractions the whisper-normalizer package adds to openai-whisper's English rules (kinda → kind of,
# cause → because, ...). Kimi-Audio-Evalkit, lmms-eval, AU-Harness and the Open ASR Leaderboard all
# run openai-whisper's own rules, so conventions reproducing them leave these out.
_PACKAGE_ADDITIONS = frozenset({r"\bkinda\b", r"\bsorta\b", r"\bdunno\b", r"\bcause\b"})


def openai_whisper_english() -> Any:
    """openai-whisper's EnglishTextNormalizer (github.com/openai/whisper, whisper/normalizers/english.py)."""
    from whisper_normalizer.english import EnglishTextNormalizer

    rules = EnglishTextNormalizer()
    rules.replacers = {pattern: text for pattern, text in rules.replacers.items() if pattern not in _PACKAGE_ADDITIONS}
    return rules


def normalize_basic(text: str) -> str:
    """The `basic` normalizer as a function."""
    return normalizer("basic")(text)


# Scripts written without spaces between words: in 'mixed' units each of their characters is a token.
_UNSPACED = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Myanmar}\p{Khmer}"
_MIXED = regex.compile(rf"[{_UNSPACED}]|[^\s{_UNSPACED}]+")
UNITS = ("word", "character", "mixed")


# Zero-width characters: word separators in Thai and Khmer text, joiners elsewhere; never a character said.
_INVISIBLE = frozenset("\u200b\u200c\u200d\u2060\ufeff")


def split_units(text: str, unit: str) -> list[str]:
    """Tokens of a normalized text: words, characters (spaces and zero-width characters dropped), or mixed
    (CJK characters and other words)."""
    if unit == "word":
        return text.split()
    if unit == "character":
        return [ch for ch in text if not ch.isspace() and ch not in _INVISIBLE]
    if unit == "mixed":
        return _MIXED.findall(text)
    raise ValueError(f"unknown error unit '{unit}'")

