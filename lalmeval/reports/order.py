"""Natural order of sample ids: 0, 1, 2, 10, 100 and a2 before a10, not the text order 0, 1, 10, 100, 2."""

from __future__ import annotations

import re

_RUNS = re.compile(r"([0-9]+)")


def natural_key(text: str) -> tuple:
    """A sort key comparing runs of digits by their value (any length) and the rest as text, case-blind
    first; numbers sort before letters, and ids equal but for case or leading zeros keep a fixed order."""
    parts = []
    for i, part in enumerate(_RUNS.split(text)):
        if not part:
            continue
        if i % 2:  # a run of digits: its value, compared without int() so no length is too long
            digits = part.lstrip("0")
            parts.append((0, len(digits), digits))
        else:
            parts.append((1, 0, part.casefold()))
    return tuple(parts), text
