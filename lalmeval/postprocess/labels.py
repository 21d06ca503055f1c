"""Label normalization for exact match: case, punctuation and option-letter answers."""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal

# Runs are bounded ({0,8}): several unbounded `\s*` side by side make a regex try every split of a long
# run of spaces, which takes minutes on a degenerate reply.
_LETTER_PATTERNS = [
    re.compile(r"\\boxed\{\s{0,8}\(?([a-j])\)?\s{0,8}\}"),
    re.compile(r"\\box\{\s{0,8}\(?([a-j])\)?\s{0,8}\}"),
    re.compile(r"\b(?:final answer|answer|option|choice)\s{0,8}(?:is|:)?\s{0,8}[:\-]?\s{0,8}\(?\*{0,4}([a-j])\*{0,4}\)?(?![a-z])"),
    re.compile(r"^\s{0,64}\(?\*{0,4}([a-j])\*{0,4}\)?\s{0,8}(?:[.):\-]|$)"),
    re.compile(r"^\s{0,64}\(([a-j])\)"),
]


_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?$")


def as_number(text: str) -> "Decimal | None":
    """The value of a text that is a plain number ('3', '3.0', '-2.50', '1e3'; a closing period allowed), else None."""
    plain = unicodedata.normalize("NFKC", text).strip().lower().removesuffix(".").strip()
    if len(plain) > 64 or not _NUMBER.match(plain):
        return None
    return Decimal(plain)


def _plain(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(" " if unicodedata.category(ch).startswith(("P", "S")) else ch for ch in text)
    return " ".join(text.split())


def option_letter(text: str) -> str | None:
    """The option letter an answer states ('(B)', 'B.', 'Answer: B', '\\boxed{B}'), if any."""
    lowered = unicodedata.normalize("NFKC", text).strip().lower()
    for pattern in _LETTER_PATTERNS:
        match = pattern.search(lowered)
        if match:
            return match.group(1)
    return None


def normalize_label(text: str, letters: bool) -> str:
    """Lowercase, strip punctuation and spacing; for letter answers, the stated letter."""
    if letters:
        letter = option_letter(text)
        if letter:
            return letter
    return _plain(text)
