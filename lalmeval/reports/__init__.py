"""Reports a person can open, written from a run directory: report.html, results.csv, results.md; leaderboards."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Callable

from lalmeval.errors import WriteFailed, write_failed
from lalmeval.reports.html import run_report
from lalmeval.reports.leaderboard import build, console_table, leaderboard_html
from lalmeval.reports.rundir import RunDir, load_run
from lalmeval.reports.samples import collect
from lalmeval.reports.side_by_side import payload
from lalmeval.reports.side_by_side_page import section as samples_section
from lalmeval.reports.tables import results_csv, results_md
from lalmeval.results.store import write_atomic

__all__ = ["RunDir", "load_run", "render_run", "write_leaderboard", "write_reports"]


def _html(run: RunDir) -> str:
    return run_report(run, *collect(run))


REPORTS: dict[str, Callable[[RunDir], str]] = {"report.html": _html, "results.csv": results_csv, "results.md": results_md}


def render_run(run_dir: Path) -> list[Path]:
    """Write report.html, results.csv and results.md into a run directory; returns their paths."""
    run = load_run(run_dir)
    return [write_atomic(run_dir / name, make(run)) for name, make in REPORTS.items()]


def write_leaderboard(run_dirs: list[Path], out: Path) -> str:
    """Write the leaderboard of several runs, with their samples side by side, to `out`; returns its console table.
    Bad run dirs are UserErrors."""
    unique: dict[Path, RunDir] = {}
    for path in run_dirs:
        unique.setdefault(path.resolve(), load_run(path))  # a directory named twice counts once
    runs = list(unique.values())
    board = build(runs)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_failed(out.parent, exc) from None
    samples = samples_section(payload(runs, out.resolve().parent))
    write_atomic(out, leaderboard_html(board, runs, out.resolve().parent, samples))
    failed = [f"{run.path}: failed before its first request: {run.failed}" for run in runs if run.failed]
    return "\n".join([console_table(board), *failed])


def write_reports(run_dir: Path) -> list[Path]:
    """render_run for the end of a run: the scores are already on disk, so a report problem is a warning, not a failed run.

    Each report stands alone: one that cannot be built or written does not keep the others from
    being written, and an older copy of it is removed, so no report contradicts final_scores.json."""
    try:
        run = load_run(run_dir)
    except Exception as exc:  # noqa: BLE001 - reported, and `lalmeval run --resume` writes them again
        print(f"warning: reports not written to {run_dir}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return []
    written = []
    for name, make in REPORTS.items():
        path = run_dir / name
        try:
            written.append(write_atomic(path, make(run)))
        except Exception as exc:  # noqa: BLE001 - a report bug or a full disk must not fail a scored run
            reason = str(exc) if isinstance(exc, WriteFailed) else f"{type(exc).__name__}: {exc}"
            stale = path.exists()
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            removed = "; the older copy was removed" if stale and not path.exists() else ""
            print(f"warning: {name} not written ({reason}){removed}; the run's scores stand", file=sys.stderr)
    return written
