"""Where the files lalmeval ships beside its code are: the built-in runspecs, the demo data and config.

In a checkout they are the top-level folders (runspecs/ is where a user drops a runspec of their
own). A wheel carries a copy of them under lalmeval/_data/ (setup.py copies them at build time),
with the same layout, so a runspec's relative path (`../../private_datasets/...`) means the same
in both.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_WHEEL_COPY = _PACKAGE / "_data"
ROOT = _WHEEL_COPY if _WHEEL_COPY.is_dir() else _PACKAGE.parent
RUNSPECS = ROOT / "runspecs"
DEMO_COMMANDS = ROOT / "private_datasets" / "demo_commands"
DEMO_CONFIG = ROOT / "config.yaml"
