"""Text from outside (replies, data, messages) made safe to encode, store and print.

JSON may spell a lone UTF-16 surrogate (`"\\ud800"`): Python decodes it into a string that UTF-8
cannot encode, so every later write, hash or request of that text would fail. Such code points are
replaced by U+FFFD (the Unicode replacement character) where the text enters; what is stored and
scored is that text. Control characters are kept in stored text (JSON escapes them) but shown
escaped (`\\x1b`) in messages, so a server cannot drive the terminal that prints its error.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\[uU]0{0,4}[dD][89a-fA-F]")  # how JSON or YAML text spells one
# C0 and C1 control characters except tab and newline, and DEL.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def without_surrogates(text: str) -> str:
    """`text` with every lone surrogate code point replaced by U+FFFD."""
    return _SURROGATE.sub(REPLACEMENT, text) if not text.isascii() else text


def mended(node: Any) -> Any:
    """JSON-like data with lone surrogates replaced in every string (keys included); other values as they are."""
    if isinstance(node, str):
        return without_surrogates(node)
    if isinstance(node, dict):
        return {mended(k): mended(v) for k, v in node.items()}
    if isinstance(node, list):
        return [mended(v) for v in node]
    return node


def may_spell_surrogates(text: str) -> bool:
    """Whether JSON or YAML text holds an escape that decodes to a surrogate (then its data needs mending)."""
    return "\\" in text and _ESCAPED_SURROGATE.search(text) is not None


def printable(text: str) -> str:
    """`text` for a message: control characters other than tab and newline written as `\\xNN`."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


QUOTE_LIMIT = 200   # characters of user data a message quotes: a cell may hold 100 KB of base64


def clipped(text: str, limit: int = QUOTE_LIMIT) -> str:
    """User data as a message quotes it: printable, and cut to `limit` characters with its full length said."""
    text = printable(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"
