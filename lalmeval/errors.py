"""Errors the command line turns into one line and an exit code: bad input (2), a refused write (4), Ctrl-C (130)."""

from __future__ import annotations

import difflib
import errno
from pathlib import Path
from typing import Iterable

# The exit codes of every command (README, "Exit codes").
EXIT_INTERNAL_ERROR = 1
EXIT_USER_ERROR = 2
EXIT_FAILED_SAMPLES = 3
EXIT_WRITE_FAILED = 4
EXIT_INTERRUPTED = 130

# What a full disk looks like to a writer: no space, over quota, a file past the size limit.
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class UserError(Exception):
    """A problem with the user's input (config, runspec, data, endpoint) — not a bug."""


class LaunchFailed(UserError):
    """A server named by `launch` did not come up: the run never sent a request."""


class WriteFailed(Exception):
    """The disk refused a write (full, quota, file too large): the run must stop, keeping what is written."""


def write_failed(path: Path, exc: OSError) -> WriteFailed:
    """The one-line reason a write of `path` failed."""
    return WriteFailed(f"cannot write {path}: {exc.strerror or exc}")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) ended a run; `stage` says when and what is on disk, `resumable` whether stored work is reused."""

    def __init__(self, stage: str, resumable: bool = True):
        super().__init__(stage)
        self.stage, self.resumable = stage, resumable


def closest(name: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean 'x'?)' for the nearest choice, or ''."""
    # Half the letters in common is a typo of a short name ('qz' for 'qs'), and chance for a long one
    # ('nosuchthing' and 'instruction_following'): longer names must share more.
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5 if len(name) <= 4 else 0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""
