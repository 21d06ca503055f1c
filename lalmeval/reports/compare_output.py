"""What lalmeval compare prints and writes: the console tables, the JSON file and the HTML page."""

from __future__ import annotations

from typing import Any, Optional, Sequence, TextIO

from lalmeval.reports.compare import ALPHA, Comparison, regressions, verdict, worse_by
from lalmeval.reports.console import text_table
from lalmeval.reports.html import esc, page, table


def _num(value: Optional[float], sign: bool = False) -> str:
    return "n/a" if value is None else (f"{value:+.2f}" if sign else f"{value:.2f}")


def _p(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _interval(row: dict[str, Any]) -> str:
    ci = row.get("ci95")
    return "n/a" if not ci else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def row_cells(row: dict[str, Any], points: Optional[float]) -> list[str]:
    """Dataset, metric, direction, samples, both scores, the difference, its interval, p, corrected p, verdict."""
    if "difference" not in row:
        return [row["dataset"], row["metric"], _arrow(row), "0", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", row.get("note", "")]
    said = verdict(row)
    if said == "worse" and points is not None and worse_by(row) > points:
        said = "REGRESSION"
    return [row["dataset"], row["metric"], _arrow(row), str(row["num_samples"]), _num(row["baseline"]), _num(row["candidate"]),
            _num(row["difference"], sign=True), _interval(row), _p(row["p_value"]), _p(row.get("p_holm")), said]


def _arrow(row: dict[str, Any]) -> str:
    return "↓" if row["lower_is_better"] else "↑"


HEADER = ["Dataset", "Metric", "Better", "Paired", "Baseline", "Candidate", "Δ (cand − base)", "95% CI", "p", "p (Holm)", "Verdict"]


def console(result: Comparison, points: Optional[float], stream: Optional[TextIO] = None) -> str:
    """The table of one candidate against the baseline, and the changes that survive the correction."""
    title = f"{result.candidate.label} against {result.baseline.label} (paired bootstrap; Holm over {_tested(result)} comparison(s))"
    text = text_table(HEADER, [row_cells(r, points) for r in result.rows], range(3, 10), title=title, stream=stream)
    survivors = [r for r in result.rows if verdict(r) != "no change"]
    lines = [f"Changes that survive the correction (p (Holm) < {ALPHA:g}): "
             + (", ".join(f"{r['dataset']} · {r['metric']} {verdict(r)} by {abs(r['difference']):.2f}" for r in survivors) or "none")]
    lines += [f"Not compared: {note}" for note in result.not_compared]
    return text + "\n" + "\n".join(lines)


def _tested(result: Comparison) -> int:
    return sum(1 for r in result.rows if r.get("p_value") is not None)


def as_json(results: Sequence[Comparison], points: Optional[float], refused: bool, code: int) -> dict[str, Any]:
    """The content of --json FILE."""
    return {
        "exit_code": code, "refused": refused, "alpha": ALPHA, "correction": "holm", "fail_on_regression": points,
        "comparisons": [{
            "baseline": {"run": str(r.baseline.run.path), "run_id": r.baseline.run.run_id, "model": r.baseline.model},
            "candidate": {"run": str(r.candidate.run.path), "run_id": r.candidate.run.run_id, "model": r.candidate.model},
            "like_for_like": not r.differences, "differences": r.differences, "not_compared": r.not_compared,
            "rows": [{**row, "verdict": verdict(row) if "difference" in row else None} for row in r.rows],
            "regressions": [f"{row['dataset']} · {row['metric']}" for row in regressions(r, points)] if points is not None else [],
        } for r in results],
    }


def html(results: Sequence[Comparison], points: Optional[float], refused: bool) -> str:
    """One self-contained page: per candidate, the like-for-like verdict and the table of differences."""
    parts = ["<h1>Comparison of runs</h1>",
             f"<p>Candidate − baseline on the samples both scored (paired bootstrap, 95% interval); p corrected by Holm over the "
             f"comparisons of each candidate; a change counts when p (Holm) &lt; {ALPHA:g}. ↓ lower is better, ↑ higher is better."
             + (f" A regression is a change for the worse larger than {points:g} point(s)." if points is not None else "") + "</p>"]
    for result in results:
        parts.append(f"<h2>{esc(result.candidate.label)} against {esc(result.baseline.label)}</h2>")
        if result.differences:
            state = "refused" if refused else "compared anyway (--allow-different)"
            parts.append(f'<p class="warn">Not like for like ({state}):</p><ul>'
                         + "".join(f"<li>{esc(line)}</li>" for line in result.differences) + "</ul>")
        if result.differences and refused:
            continue
        rows = [row_cells(r, points) for r in result.rows]
        classes = ["regression" if cells[-1] in ("REGRESSION", "worse") else "better" if cells[-1] == "better" else "" for cells in rows]
        parts.append(table(HEADER, [[esc(c) for c in cells] for cells in rows], range(3, 10), row_classes=classes))
        parts += [f"<p>Not compared: {esc(note)}</p>" for note in result.not_compared]
    style = "<style>tr.regression td{background:#fde8e8}tr.better td{background:#e8f6ea}p.warn{color:#8a4b00;font-weight:600}</style>"
    return page("lalmeval compare", style + "".join(parts))
