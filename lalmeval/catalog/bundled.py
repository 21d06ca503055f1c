"""Where the files lalmeval ships beside its code are: the built-in runspecs, the demo data and config.

In a checkout they are the top-level folders (runspecs/ is where a user drops a runspec of their
own). A wheel carries a copy of them under lalmeval/_data/ (setup.py copies them at build time),
with the same layout, so a runspec's relative path (`../../private_datasets/...`) means the same
in both.
"""

from __future__ import annotations

import shlex
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # lalmeval/, this file being lalmeval/catalog/bundled.py
_WHEEL_COPY = _PACKAGE / "_data"
ROOT = _WHEEL_COPY if _WHEEL_COPY.is_dir() else _PACKAGE.parent
RUNSPECS = ROOT / "runspecs"
DEMO_COMMANDS = ROOT / "private_datasets" / "demo_commands"
DEMO_CONFIG = ROOT / "config.yaml"


def install(extra: str) -> str:
    """The pip command that installs an optional extra of lalmeval, as this copy was installed: from a checkout
    (editable, `pip install -e '.[x]'` in the repository) or as a package (`pip install 'lalmeval[x]'`)."""
    if ROOT == _PACKAGE.parent and (ROOT / "pyproject.toml").is_file():
        return f"pip install -e {shlex.quote(f'{ROOT}[{extra}]')}"
    return f"pip install 'lalmeval[{extra}]'"
