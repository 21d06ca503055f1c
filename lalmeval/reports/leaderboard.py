"""One comparison across runs and models: a leaderboard as HTML and as a console table."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from lalmeval.reports.html import esc, page, partial_badge, table
from lalmeval.reports.plots import Scored, legend, score_charts
from lalmeval.reports.rundir import RunDir
from lalmeval.reports.console import text_table
from lalmeval.reports.tables import fmt, fmt_ci

Column = tuple[str, str]  # (dataset, metric)


def lower_is_better(metric: str) -> bool:
    """Error rates rank ascending; every other metric (accuracy, BLEU, judges...) descending."""
    return metric.endswith("error_rate")


@dataclass(frozen=True)
class Entry:
    """One model of one run, with the label that tells it apart from the same model in another run."""

    label: str
    model: str
    run: RunDir


@dataclass
class Leaderboard:
    """Entries (ranked), the (dataset, metric) columns and each entry's score in each column."""

    entries: list[Entry]
    columns: list[Column]
    cells: dict[tuple[int, Column], dict[str, Any]] = field(default_factory=dict)
    mean_rank: list[Optional[float]] = field(default_factory=list)

    def cell(self, entry: int, column: Column) -> Optional[dict[str, Any]]:
        return self.cells.get((entry, column))


def _run_names(runs: Sequence[RunDir]) -> list[str]:
    """Run ids, or paths where two runs share an id."""
    counts = Counter(r.run_id for r in runs)
    return [r.run_id if counts[r.run_id] == 1 else str(r.path) for r in runs]


def _value(score: Optional[dict[str, Any]]) -> Optional[float]:
    value = (score or {}).get("score")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ranks(board: Leaderboard) -> list[Optional[float]]:
    """Each entry's mean rank over the columns it has a score in (1 = best; ties share the better rank)."""
    ranks: list[list[int]] = [[] for _ in board.entries]
    for column in board.columns:
        scored = [(v, i) for i in range(len(board.entries)) if (v := _value(board.cell(i, column))) is not None]
        sign = 1 if lower_is_better(column[1]) else -1
        for value, i in scored:
            ranks[i].append(1 + sum(1 for other, _ in scored if sign * other < sign * value))
    return [sum(r) / len(r) if r else None for r in ranks]


def build(runs: Sequence[RunDir]) -> Leaderboard:
    """Every model of every run as an entry, ranked by mean rank; labels carry the run when there are several."""
    names = _run_names(runs)
    entries, cells, columns = [], {}, {}
    for run, name in zip(runs, names):
        for model in dict.fromkeys(s["model"] for s in run.scores):
            entries.append(Entry(model if len(runs) == 1 else f"{model} ({name})", model, run))
            for score in run.scores:
                if score["model"] == model:
                    column = (score["dataset"], score["metric"])
                    columns.setdefault(column, None)
                    cells[(len(entries) - 1, column)] = score
    board = Leaderboard(entries, list(columns), cells)
    ranks = _ranks(board)
    order = sorted(range(len(entries)), key=lambda i: (ranks[i] is None, ranks[i] or 0.0, entries[i].label))
    board.entries = [entries[i] for i in order]
    board.cells = {(order.index(i), c): s for (i, c), s in cells.items()}
    board.mean_rank = [ranks[i] for i in order]
    return board


def _label_list(labels: list[str], limit: int = 4) -> str:
    shown = ", ".join(labels[:limit])
    return shown + (f" and {len(labels) - limit} more" if len(labels) > limit else "")


def warnings(board: Leaderboard) -> list[str]:
    """What makes the ranking less than like for like: entries scored on different dataset–metric
    columns, or on different numbers of samples of one column. Each says how entries are ranked."""
    found = []
    missing = {c: [e.label for i, e in enumerate(board.entries) if board.cell(i, c) is None] for c in board.columns}
    gaps = {c: labels for c, labels in missing.items() if labels}
    if gaps:
        lacks = "; ".join(f"{d} {m}: no score from {_label_list(labels)}" for (d, m), labels in gaps.items())
        found.append(f"the models were not scored on the same datasets ({lacks}). Each is ranked by its mean rank over the "
                     "columns it has a score in, so mean ranks over different columns are not like for like.")
    for column in board.columns:
        counts = {e.label: cell.get("num_samples") for i, e in enumerate(board.entries) if (cell := board.cell(i, column)) is not None}
        if len(set(counts.values())) > 1:
            sizes = ", ".join(f"{label}: {count}" for label, count in counts.items())
            found.append(f"{column[0]} {column[1]}: the scores cover different numbers of samples ({sizes}); they are ranked "
                         "as they are, though they were not measured on the same samples.")
    return found


def console_table(board: Leaderboard) -> str:
    """The leaderboard for the terminal: scores with two decimals, '*' on partial runs' scores."""
    header = ["#", "Model"] + [f"{d} {m}" for d, m in board.columns] + ["Mean rank"]
    rows = []
    for i, entry in enumerate(board.entries):
        cells = []
        for column in board.columns:
            score = board.cell(i, column)
            cells.append("-" if score is None else fmt(score.get("score")) + ("*" if entry.run.partial else ""))
        rank = board.mean_rank[i]
        rows.append([str(i + 1), entry.label, *cells, "-" if rank is None else f"{rank:.2f}"])
    text = text_table(header, rows, [0, *range(2, len(header))])
    if any(e.run.partial for e in board.entries):
        text += "\n* partial: the run was interrupted or its data broke off"
    return "\n".join([text, *(f"warning: {line}" for line in warnings(board))])


def _cell_html(score: Optional[dict[str, Any]], best: bool, partial: bool) -> str:
    if score is None:
        return '<span class="small">–</span>'
    text = esc(fmt(score.get("score")))
    text = f'<span class="best">{text}</span>' if best else f"<strong>{text}</strong>"
    interval = fmt_ci(score)
    failed = score.get("num_failed") or 0
    extra = (f'<div class="small">{esc(interval)}</div>' if interval else "") + (f'<div class="small reason">{esc(failed)} failed</div>' if failed else "")
    return text + (partial_badge() if partial else "") + extra


def _board_table(board: Leaderboard) -> str:
    best = {}
    for column in board.columns:
        values = [v for i in range(len(board.entries)) if (v := _value(board.cell(i, column))) is not None]
        if values:
            best[column] = min(values) if lower_is_better(column[1]) else max(values)
    header = ["#", "Model"] + [f"{d} · {m} {'↓' if lower_is_better(m) else '↑'}" for d, m in board.columns] + ["Mean rank"]
    rows = []
    for i, entry in enumerate(board.entries):
        cells = [_cell_html(board.cell(i, c), _value(board.cell(i, c)) == best.get(c), entry.run.partial) for c in board.columns]
        rank = board.mean_rank[i]
        rows.append([str(i + 1), esc(entry.label), *cells, "–" if rank is None else f"{rank:.2f}"])
    numeric = [0, *range(2, len(header))]
    return table(header, rows, numeric, table_id="leaderboard")


def _runs_table(runs: Sequence[RunDir], out_dir: Path) -> str:
    rows = []
    for run, name in zip(runs, _run_names(runs)):
        report = run.path / "report.html"
        link = f'<a href="{esc(Path(os.path.relpath(report, out_dir)).as_posix())}">report</a>' if report.exists() else ""
        status = f"failed ({run.failed})" if run.failed else f"partial ({run.why_partial})" if run.partial else "complete"
        rows.append([esc(name), esc(run.path), esc(run.final.get("created", "")), esc(status), link])
    return table(["Run", "Directory", "Created", "Status", ""], rows)


def _aggregates(board: Leaderboard) -> str:
    labels = {(id(e.run), e.model): e.label for e in board.entries}
    runs = list({id(e.run): e.run for e in board.entries}.values())
    rows = [[esc(labels.get((id(run), a.get("model")), a.get("model"))), esc(", ".join(a.get("names") or [])), esc(a.get("metric")),
             esc(fmt(a.get("pooled"))), esc(fmt(a.get("weighted_mean"))), esc(fmt(a.get("unweighted_mean"))), esc(a.get("num_samples", ""))]
            for run in runs for a in run.aggregates]
    if not rows:
        return ""
    return "<h2>Aggregates</h2>" + table(["Model", "Aggregate", "Metric", "Pooled", "Weighted mean", "Unweighted mean", "Scored samples"], rows, [3, 4, 5, 6])


def leaderboard_html(board: Leaderboard, runs: Sequence[RunDir], out_dir: Path, samples: str = "") -> str:
    """The leaderboard page: ranked table, runs, a chart per metric, the runs' aggregates and (`samples`) their samples side by side."""
    banner = ('<div class="banner partial"><strong>Partial results.</strong> Scores marked partial come from a run that was interrupted or whose data broke off, '
              "and cover only the samples it finished.</div>") if any(r.partial for r in runs) else ""
    banner += "".join(f'<div class="banner partial warning"><strong>Not like for like.</strong> {esc(line[0].upper() + line[1:])}</div>'
                      for line in warnings(board))
    scored = [Scored(c[0], e.label, i, s, e.run.partial) for i, e in enumerate(board.entries)
              for c in board.columns if (s := board.cell(i, c)) is not None]
    charts = "".join(f"<div>{c}</div>" for c in score_charts(scored))
    body = (f"<header><h1>Leaderboard</h1><p class=\"meta\">{len(board.entries)} model(s) from {len(runs)} run(s). "
            "Ranked by mean rank over the columns each model has a score in; ↓ lower is better, ↑ higher is better; "
            f"best score per column highlighted.</p>{banner}</header>"
            f"{_board_table(board)}<h2>Runs</h2>{_runs_table(runs, out_dir)}"
            f'<h2>Scores</h2><p class="small">Whiskers: 95% interval where the score has one.</p>{legend([e.label for e in board.entries])}'
            f'<div class="plots">{charts}</div>{_aggregates(board)}{samples}')
    return page("lalmeval leaderboard", body)
