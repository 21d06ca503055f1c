"""Reports a person can open, written from a run directory: report.html, results.csv, results.md; leaderboards."""

from __future__ import annotations

import sys
from pathlib import Path

from lalmeval.reports.html import run_report
from lalmeval.reports.leaderboard import build, console_table, leaderboard_html
from lalmeval.reports.rundir import RunDir, load_run
from lalmeval.reports.samples import collect
from lalmeval.reports.tables import results_csv, results_md
from lalmeval.store import write_atomic

__all__ = ["RunDir", "load_run", "render_run", "write_leaderboard", "write_reports"]


def render_run(run_dir: Path) -> list[Path]:
    """Write report.html, results.csv and results.md into a run directory; returns their paths."""
    run = load_run(run_dir)
    stats, samples = collect(run)
    outputs = {"report.html": run_report(run, stats, samples), "results.csv": results_csv(run), "results.md": results_md(run)}
    return [_write(run_dir / name, text) for name, text in outputs.items()]


def _write(path: Path, text: str) -> Path:
    write_atomic(path, text)  # a reader never sees half a report
    return path


def write_leaderboard(run_dirs: list[Path], out: Path) -> str:
    """Write the leaderboard of several runs to `out`; returns its console table. Bad run dirs are UserErrors."""
    unique: dict[Path, RunDir] = {}
    for path in run_dirs:
        unique.setdefault(path.resolve(), load_run(path))  # a directory named twice counts once
    runs = list(unique.values())
    board = build(runs)
    out.parent.mkdir(parents=True, exist_ok=True)
    _write(out, leaderboard_html(board, runs, out.resolve().parent))
    return console_table(board)


def write_reports(run_dir: Path) -> list[Path]:
    """render_run for the end of a run: the scores are already on disk, so a report problem is a warning, not a failed run."""
    try:
        return render_run(run_dir)
    except Exception as exc:  # noqa: BLE001 - reported, and `lalmeval report` can try again
        print(f"warning: reports not written to {run_dir}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return []
