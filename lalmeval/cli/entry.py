"""How the user started lalmeval, so every command it prints runs as printed in their shell."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Optional

# evaluate.sh sets this to the words that started it (e.g. `bash evaluate.sh`); they stand for `... run`.
ENTRY_VARIABLE = "LALMEVAL_ENTRY"


def _on_path(name: str, path: str) -> bool:
    """Whether typing `name` in the shell starts exactly `path`."""
    found = shutil.which(name)
    if found is None:
        return False
    try:
        return os.path.samefile(found, path) and Path(found).parent == Path(path).parent
    except OSError:
        return False


def _interpreter() -> str:
    """The shortest name of this Python that the shell resolves to this very interpreter (a venv's, say)."""
    for name in ("python", "python3"):
        if _on_path(name, sys.executable):
            return name
    return shlex.quote(sys.executable)


def program(argv0: Optional[str] = None) -> str:
    """`lalmeval`, `python -m lalmeval` or a path: the way this process was started."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) == "lalmeval.__main__":
        return f"{_interpreter()} -m lalmeval"
    if Path(argv0).name == "lalmeval":
        return "lalmeval" if _on_path("lalmeval", argv0) else shlex.quote(argv0)
    return "lalmeval"  # called in-process (tests, a notebook): the console script is the documented way


def run_command() -> str:
    """The words that start `lalmeval run` the way this run was started; flags follow them."""
    return os.environ.get(ENTRY_VARIABLE) or f"{program()} run"
