"""results.csv and results.md, plus the number formats every report shares."""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Optional

from lalmeval.reports.rundir import RunDir, ci95, subsets
from lalmeval.results.ledger import NOT_RUN

PROTOCOL_FIELDS = ["protocol", "normalizer", "error_unit", "alignment", "tokenizer", "judge_template", "prompt", "generation"]
CSV_FIELDS = ["run_id", "model", "dataset", "metric", "subset", "score", "ci_low", "ci_high", "stderr",
              "num_samples", "num_failed", *PROTOCOL_FIELDS, "partial"]


def not_run(details: dict[str, Any]) -> int:
    """How many of a score's failed samples were never sent: a stopped run left them (Ctrl-C, a budget); not failures."""
    found = (details.get("failures") or {}).get(NOT_RUN) if isinstance(details.get("failures"), dict) else None
    return int(found) if isinstance(found, int) else 0


def fmt(value: Any) -> str:
    """A score with two decimals; 'n/a' when there is none."""
    return f"{value:.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "n/a"


def fmt_p(value: Any) -> str:
    """A p-value as every report prints it: three decimals, '< 0.001' below that, 'n/a' when there is none."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "n/a"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def fmt_ci(score: dict[str, Any]) -> str:
    """'[low, high]' with two decimals, or '' when the score has no interval."""
    interval = ci95(score)
    return f"[{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""


def _judge_template(value: Any) -> Optional[str]:
    if isinstance(value, dict):
        digest = str(value.get("sha256") or "")
        return f"{value.get('name')} (sha256 {digest[:12]})" if digest else str(value.get("name"))
    return None if value is None else str(value)


def protocol_cells(score: dict[str, Any]) -> dict[str, Optional[str]]:
    """The protocol a score was scored under and the settings it used, one text per PROTOCOL_FIELDS entry."""
    used = (score.get("details") or {}).get("protocol")
    if not isinstance(used, dict):
        return {name: None for name in PROTOCOL_FIELDS}
    compact = lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True) if v else None  # noqa: E731
    return {"protocol": f"{used.get('name')}@{used.get('version')}", "normalizer": used.get("normalizer"),
            "error_unit": used.get("error_unit"), "alignment": used.get("alignment"), "tokenizer": used.get("tokenizer"),
            "judge_template": _judge_template(used.get("judge_template")), "prompt": compact(used.get("prompt")),
            "generation": compact(used.get("generation"))}


def own_number(details: dict[str, Any]) -> Optional[dict[str, Any]]:
    """lalmeval's own number kept beside a peer's (details.lalmeval), None for a score that has only one."""
    own = (details or {}).get("lalmeval")
    return own if isinstance(own, dict) and "score" in own else None


def two_number_notes(scores: list[dict[str, Any]]) -> list[str]:
    """One line per score printed as a peer prints it whose lalmeval number differs: both numbers and the step between them."""
    notes = []
    for score in scores:
        own = own_number(score.get("details") or {})
        if own and own.get("differs_by"):
            notes.append(f"{score['dataset']} {score['metric']}: Score {fmt(score.get('score'))} is {own.get('score_is')}, "
                         f"lalmeval's own number is {fmt(own.get('score'))}; they differ by {own['differs_by']}")
    return notes


def fmt_interval(interval: Any) -> str:
    """'[low, high]' with two decimals for a two-number list, '' otherwise."""
    if isinstance(interval, (list, tuple)) and len(interval) == 2 and all(isinstance(v, (int, float)) for v in interval):
        return f"[{interval[0]:.2f}, {interval[1]:.2f}]"
    return ""


def result_rows(run: RunDir) -> list[dict[str, Any]]:
    """One row per score, then one per subset of that score, with the CSV's fields."""
    rows = []
    for score in run.scores:
        interval = ci95(score)
        base = {"run_id": run.run_id, "model": score["model"], "dataset": score["dataset"], "metric": score["metric"],
                **protocol_cells(score), "partial": run.partial}
        rows.append({**base, "subset": "", "score": score.get("score"),
                     "ci_low": interval[0] if interval else None, "ci_high": interval[1] if interval else None,
                     "stderr": score.get("stderr"), "num_samples": score.get("num_samples"), "num_failed": score.get("num_failed")})
        for name, sub in subsets(score).items():
            sub_ci = ci95(sub)
            rows.append({**base, "subset": name, "score": sub.get("score"),
                         "ci_low": sub_ci[0] if sub_ci else None, "ci_high": sub_ci[1] if sub_ci else None,
                         "stderr": sub.get("stderr"), "num_samples": sub.get("num_samples"), "num_failed": sub.get("num_failed")})
    return rows


def results_csv(run: RunDir) -> str:
    """results.csv: full-precision numbers, empty cells where a value is absent."""
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in result_rows(run):
        writer.writerow({k: ("" if v is None else str(v).lower() if isinstance(v, bool) else spreadsheet_safe(v)) for k, v in row.items()})
    return out.getvalue()


# What a spreadsheet reads as the start of a formula (or, for tab and CR, a cell shifted to one).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """A text cell a spreadsheet shows as text, never runs: one starting like a formula gets a leading
    apostrophe (OWASP's CSV injection rule); numbers stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _md_cell(value: Any) -> str:
    # A pipe or a newline in a name would break the table row.
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured markdown table."""
    lines = ["| " + " | ".join(map(_md_cell, header)) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def results_md(run: RunDir) -> str:
    """results.md: the score table (and the aggregates) with two decimals."""
    title = f"# Results of run {_md_cell(run.run_id)}"
    if run.partial:
        title += f"\n\n**Partial:** {run.why_partial}; scores cover only the samples it finished."
    header = ["Model", "Dataset", "Metric", "Score", "95% CI", "Samples", "Failed"]
    rows = [[r["model"], r["dataset"] + (f" / {r['subset']}" if r["subset"] else ""), r["metric"],
             fmt(r["score"]) + (" (partial)" if r["partial"] else ""),
             f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]" if r["ci_low"] is not None else "",
             _count(r["num_samples"]), _count(r["num_failed"])] for r in result_rows(run)]
    parts = [title, markdown_table(header, rows)]
    protocols = protocol_rows(run)
    if protocols:
        parts += ["## Scoring protocols", markdown_table(PROTOCOL_HEADER, protocols)]
    if run.aggregates:
        grouped = any("group" in a for a in run.aggregates)
        agg = [[a.get("model"), ", ".join(a.get("names") or []), a.get("metric"), fmt(a.get("pooled")), fmt_interval(a.get("pooled_ci95")),
                fmt(a.get("weighted_mean")), fmt(a.get("unweighted_mean")), _count(a.get("num_samples"))]
               + ([group_cell(a)] if grouped else []) for a in run.aggregates]
        parts += ["## Aggregates", markdown_table(["Model", "Aggregate", "Metric", "Pooled", "Pooled 95% CI", "Weighted", "Unweighted", "Samples"]
                                                  + (["Group score"] if grouped else []), agg)]
    return "\n\n".join(parts) + "\n"


PROTOCOL_HEADER = ["Model", "Dataset", "Metric", "Protocol", "Normalizer", "Unit", "Alignment", "Tokenizer", "Judge template",
                   "Prompt", "Generation"]


def protocol_rows(run: RunDir) -> list[list[str]]:
    """One row per score that names its protocol: what it was scored and asked with."""
    rows = []
    for score in run.scores:
        cells = protocol_cells(score)
        if cells["protocol"] is not None:
            rows.append([score["model"], score["dataset"], score["metric"], *(cells[k] or "" for k in PROTOCOL_FIELDS)])
    return rows


def group_cell(row: dict[str, Any]) -> str:
    """A runspec group's score as its aggregation names it, and how many members it is short of."""
    if "group" not in row:
        return ""
    missing = f" ({len(row['missing'])} of {row['members']} missing)" if row.get("missing") else ""
    return f"{fmt(row.get('score'))} {row['aggregation']}{missing}"


def _count(value: Optional[Any]) -> str:
    return "" if value is None else str(value)
