"""lalmeval: evaluate audio language models served behind OpenAI-compatible endpoints.

From Python: ``lalmeval.evaluate("config.yaml")`` (or a dict) runs an evaluation and returns an
``Evaluation`` with its scores; see ``lalmeval.api``. Importing the package stays cheap: the
evaluation machinery is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lalmeval.errors import UserError, WriteFailed
from lalmeval.version import __version__

if TYPE_CHECKING:
    from lalmeval.api import Evaluation, evaluate

__all__ = ["Evaluation", "UserError", "WriteFailed", "evaluate", "__version__"]
_LAZY = {"evaluate", "Evaluation"}


def __getattr__(name: str) -> Any:
    # PEP 562: `lalmeval.evaluate` and `from lalmeval import evaluate` import the API only when used.
    if name in _LAZY:
        from lalmeval import api

        return getattr(api, name)
    raise AttributeError(f"module 'lalmeval' has no attribute {name!r}")
