"""${VAR} and ${VAR:-default} in config values, taken from the environment; defaults may nest (${A:-${B}})."""

from __future__ import annotations

import os
import re
from typing import Any, Optional

from lalmeval.errors import UserError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def interpolate(node: Any, source: str, path: str = "") -> Any:
    """`node` with every ${VAR} replaced; an unset variable without a default is an error naming it."""
    if isinstance(node, dict):
        return {k: interpolate(v, source, f"{path}.{k}" if path else str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate(v, source, f"{path}[{i}]") for i, v in enumerate(node)]
    if not isinstance(node, str):
        return node
    return _expand(node, source, path)


def _expand(text: str, source: str, path: str) -> str:
    """One string with its references replaced, left to right; what is not a reference stays as written."""
    out, at = [], 0
    while (start := text.find("${", at)) >= 0:
        out.append(text[at:start])
        value, at = _reference(text, start, source, path)
        out.append(value)
    out.append(text[at:])
    return "".join(out)


def _reference(text: str, start: int, source: str, path: str) -> tuple[str, int]:
    """The value of the reference at `start` and where the text goes on after it."""
    name = _NAME.match(text, start + 2)
    after = name.end() if name else start + 2
    if name and text.startswith("}", after):
        value = os.environ.get(name.group())
        if value is None:
            raise UserError(f"{source}: environment variable '{name.group()}' is not set (used at {path})")
        return value, after + 1
    end = _closing(text, after + 2) if name and text.startswith(":-", after) else None
    if name is None or end is None:
        return "${", start + 2  # not a reference: kept as written
    value = os.environ.get(name.group())
    # The default is expanded only when it is used: an unset variable in an unused default is no error.
    return (value if value is not None else _expand(text[after + 2:end], source, path)), end + 1


def _closing(text: str, start: int) -> Optional[int]:
    """The index of the '}' that closes a default starting at `start`, nested ${...} counted."""
    depth, at = 1, start
    while at < len(text):
        if text.startswith("${", at):
            depth, at = depth + 1, at + 2
            continue
        if text[at] == "}":
            depth -= 1
            if depth == 0:
                return at
        at += 1
    return None
