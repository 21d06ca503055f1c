"""User-facing errors: each becomes one line on stderr and exit code 2."""

from __future__ import annotations

import difflib
from typing import Iterable


class UserError(Exception):
    """A problem with the user's input (config, runspec, data, endpoint) — not a bug."""


def closest(name: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean 'x'?)' for the nearest choice, or ''."""
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""
