"""${VAR} and ${VAR:-default} in config values, taken from the environment."""

from __future__ import annotations

import os
import re
from typing import Any

from lalmeval.errors import UserError

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def interpolate(node: Any, source: str, path: str = "") -> Any:
    """`node` with every ${VAR} replaced; an unset variable without a default is an error naming it."""
    if isinstance(node, dict):
        return {k: interpolate(v, source, f"{path}.{k}" if path else str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [interpolate(v, source, f"{path}[{i}]") for i, v in enumerate(node)]
    if not isinstance(node, str):
        return node

    def substitute(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name, default)
        if value is None:
            raise UserError(f"{source}: environment variable '{name}' is not set (used at {path})")
        return value

    return _ENV.sub(substitute, node)
