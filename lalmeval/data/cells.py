"""Dataset cells as text: the one rule by which references, options and instructions become strings.

A reference is compared as text, so every value a cell may hold has exactly one text, or none:

- null, a missing cell and NaN (the empty cell pandas-style writers leave) are no value at all;
- a string is itself;
- a whole number (an int, or a float or decimal without a fractional part) is its digits:
  3, 3.0 and Decimal("3.00") are all "3", so a reply "3" matches each of them;
- any other finite number is its shortest round-trip decimal, never in exponent notation:
  0.1 → "0.1", 1e-7 → "0.0000001", -2.50 → "-2.5";
- infinity, a boolean, an object (a dict, a struct) and a list are not texts: ValueError naming the
  column. (A boolean has no one spelling a model would be asked to say: yes/no, true/false, 是/否.)

References may be lists where something reads each item (one reference per turn of a dialogue);
elsewhere an empty list is no reference, a one-item list is its item and a longer one is an
error, as lalmeval scores against one reference.
"""

from __future__ import annotations

import decimal
import json
import math
import numbers
from typing import Any, Optional


def _number(value: numbers.Number, column: str) -> str:
    if isinstance(value, numbers.Integral):
        return str(int(value))
    exact = decimal.Decimal(value) if isinstance(value, decimal.Decimal) else decimal.Decimal(repr(float(value)))
    if not exact.is_finite():
        raise ValueError(f"{column}: {value!r} is not a finite number")
    if exact == exact.to_integral_value():
        return str(int(exact))
    return format(exact.normalize(), "f")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, dict):
        keys = ", ".join(map(str, list(value)[:6]))
        return f"an object (keys: {keys or 'none'})"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)}"
    return type(value).__name__


def is_absent(value: Any) -> bool:
    """None, or NaN: a cell with no value (an empty string is a value: the empty text)."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or (isinstance(value, decimal.Decimal) and value.is_nan())


def _plain(value: Any) -> Any:
    """numpy / pyarrow scalars and arrays as Python values; a float32 keeps its own shortest digits (0.1, not 0.100000001)."""
    if getattr(getattr(value, "dtype", None), "kind", None) == "f" and getattr(value, "ndim", 1) == 0:
        return decimal.Decimal(str(value)) if math.isfinite(value) else float(value)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    return value


def cell_text(value: Any, column: str) -> Optional[str]:
    """The text of a cell by the rule above; None when it holds no value; ValueError naming `column` otherwise."""
    value = _plain(value)
    if is_absent(value):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        raise ValueError(f"{column}: {_kind(value)} is not a text; write the words the answer should be (e.g. yes / no) in the data")
    if isinstance(value, numbers.Number):
        return _number(value, column)
    raise ValueError(f"{column}: {_kind(value)} is not a text (a cell is never scored as its JSON); map the column that holds the text")


# A reference is one answer, a transcript at most: a longer cell is a broken row, and scoring it would take
# minutes (an alignment grows with the product of the lengths). The sample fails at once, saying so.
MAX_REFERENCE_CHARS = 1_000_000


def check_reference_size(text: Optional[str], column: str) -> Optional[str]:
    """`text` when it is within MAX_REFERENCE_CHARS; a ValueError naming the column otherwise."""
    if text is not None and len(text) > MAX_REFERENCE_CHARS:
        raise ValueError(f"{column}: the reference is {len(text):,} characters, over the limit of {MAX_REFERENCE_CHARS:,}")
    return text


def reference_text(value: Any, column: str, per_turn: bool = False) -> Optional[str]:
    """A reference cell as text (at most MAX_REFERENCE_CHARS); with `per_turn` a list is kept as a JSON list of texts (one per turn)."""
    if isinstance(value, str):   # the common case, checked before anything walks the text
        return check_reference_size(value, column)
    return check_reference_size(_reference_text(value, column, per_turn), column)


def _reference_text(value: Any, column: str, per_turn: bool) -> Optional[str]:
    value = _plain(value)
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]" if per_turn else None
        if per_turn:
            return json.dumps([cell_text(item, f"{column}[{i}]") for i, item in enumerate(value)], ensure_ascii=False)
        if len(value) == 1:
            return cell_text(value[0], f"{column}[0]")
        raise ValueError(f"{column}: a list of {len(value)} references; a sample is scored against one (keep one in the data)")
    return cell_text(value, column)
