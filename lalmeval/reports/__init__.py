"""Reports a person can open, written from a run directory: report.html, results.csv, results.md; leaderboards."""

from __future__ import annotations

import sys
from pathlib import Path

from lalmeval.reports.html import run_report
from lalmeval.reports.rundir import RunDir, load_run
from lalmeval.reports.samples import collect
from lalmeval.reports.tables import results_csv, results_md

__all__ = ["RunDir", "load_run", "render_run", "write_reports"]


def render_run(run_dir: Path) -> list[Path]:
    """Write report.html, results.csv and results.md into a run directory; returns their paths."""
    run = load_run(run_dir)
    stats, samples = collect(run)
    outputs = {"report.html": run_report(run, stats, samples), "results.csv": results_csv(run), "results.md": results_md(run)}
    return [_write(run_dir / name, text) for name, text in outputs.items()]


def _write(path: Path, text: str) -> Path:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a report
    return path
