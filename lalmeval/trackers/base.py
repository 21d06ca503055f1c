"""What a tracker is, and the registry each tracker module adds itself to."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from lalmeval.registry import Registry

if TYPE_CHECKING:
    from lalmeval.trackers.content import ModelRun


@dataclass(frozen=True)
class Tracker:
    """One tracker: the package it needs, the extra that installs it, and how it logs a run's models."""

    package: str     # the import name
    extra: str       # lalmeval's extra that installs it (bundled.install)
    log: Callable[[Path, list[ModelRun]], Path]   # writes into the run directory; returns where


TRACKERS: Registry[Tracker] = Registry("tracker")


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Environment variables set for the time a tracker logs (they say where it writes), then put back."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
