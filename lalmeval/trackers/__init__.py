"""A finished run logged to the experiment trackers people use — offline, inside its run directory.

`--log wandb` writes a Weights & Biases offline run (`<run_dir>/wandb/`, `wandb sync` uploads it),
`--log mlflow` an MLflow file store (`<run_dir>/mlruns/`, a `file:` tracking URI) and
`--log tensorboard` TensorBoard event files (`<run_dir>/tensorboard/<model>/`). Each model of the
run is one tracker run holding its scores and a per-sample table for each dataset, all read from
the run directory (so nothing a run directory leaves out, such as a secret, reaches a tracker).
The packages are optional extras, imported only when asked for.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Optional, Sequence

from lalmeval.catalog.bundled import install
from lalmeval.errors import UserError
from lalmeval.trackers.base import TRACKERS


def add_argument(parser: argparse.ArgumentParser) -> None:
    """--log NAMES (comma-separated or repeated)."""
    parser.add_argument("--log", action="append", metavar="TRACKERS",
                        help="also log the scores and per-sample tables, offline, in the run directory: wandb, mlflow, tensorboard (comma-separated)")


def chosen(values: Optional[Sequence[str]]) -> tuple[str, ...]:
    """The trackers asked for, each known and importable — checked before a run starts, not after it."""
    _register()
    names = tuple(dict.fromkeys(n.strip() for v in values or [] for n in v.split(",") if n.strip()))
    for name in names:
        tracker = TRACKERS.get(name, where="--log")
        try:
            importlib.import_module(tracker.package)
        except ImportError as exc:
            raise UserError(f"--log {name} needs the {tracker.package} package ({exc}): {install(tracker.extra)} "
                            f"(or {install('trackers')} for all three)") from None
    return names


def log_run(run_dir: Path, names: Sequence[str]) -> bool:
    """Log a written run to each tracker; a tracker that fails is a warning (the run's scores stand). True when all logged."""
    if not names:
        return True
    _register()
    from lalmeval.trackers.content import model_runs

    try:
        runs = model_runs(run_dir)
    except Exception as exc:  # noqa: BLE001 - the run is written; only its logging is missing, and says why
        print(f"warning: --log: {run_dir} could not be read for logging: {type(exc).__name__}: {exc}", file=sys.stderr)
        return False
    ok = True
    for name in names:
        try:
            where = TRACKERS.get(name).log(run_dir, runs)
        except Exception as exc:  # noqa: BLE001 - as above, per tracker
            print(f"warning: --log {name}: not logged: {type(exc).__name__}: {exc}", file=sys.stderr)
            ok = False
            continue
        print(f"Logged to {name} ({len(runs)} model run(s), offline): {where}")
    return ok


def _register() -> None:
    """Fill the registry (each module registers itself; none imports its tracker's package until it logs)."""
    from lalmeval.trackers import mlflow_log, tensorboard_log, wandb_log  # noqa: F401
