"""The report's plots as inline SVG: scores with intervals, per-sample score histograms, latencies."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Sequence

from lalmeval.reports.rundir import ci95
from lalmeval.reports.samples import GroupStats
from lalmeval.reports.svg import Bar, bar_chart, color, histogram


@dataclass(frozen=True)
class Scored:
    """A score to plot: under which dataset, with which label and colour, and whether it is partial."""

    dataset: str
    label: str
    series: int
    score: dict[str, Any]
    partial: bool = False


def legend(labels: Sequence[str]) -> str:
    """Colour keys of the series (models, or model and run)."""
    keys = "".join(f'<span><i style="background:{color(i)}"></i>{escape(label)}</span>' for i, label in enumerate(labels))
    return f'<div class="legend">{keys}</div>'


def score_charts(items: Sequence[Scored]) -> list[str]:
    """One horizontal bar chart per metric, bars grouped by dataset, whiskers at the 95% interval."""
    charts = []
    for metric in dict.fromkeys(i.score["metric"] for i in items):
        picked = sorted((i for i in items if i.score["metric"] == metric), key=lambda i: i.dataset)
        bars = []
        for item in picked:
            interval = ci95(item.score)
            value = item.score.get("score")
            bars.append(Bar(item.dataset, item.label, value if isinstance(value, (int, float)) else None,
                            interval[0] if interval else None, interval[1] if interval else None, item.series,
                            "partial" if item.partial else ""))
        charts.append(bar_chart(bars, f"{metric}"))
    return charts


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def score_histograms(stats: Sequence[GroupStats], series: dict[str, int]) -> list[str]:
    """Per (dataset, metric, model): the distribution of per-sample scores (as the metric stores them)."""
    out = []
    for group in stats:
        for metric in group.metrics:
            values = group.scores.get(metric, [])
            note = f"{group.failed} failed" if group.failed else ""
            out.append(histogram(values, f"{group.dataset} · {metric} · {group.model}", series=series.get(group.model, 0), note=note))
    return out


def latency_histograms(stats: Sequence[GroupStats], series: dict[str, int]) -> list[str]:
    """Per model, over all its datasets: seconds per answered request, and for streamed replies to the first text
    (TTFT) and first audio (TTFA), each with p50 / p90 / p99 marked."""
    out = []
    for model, index in series.items():
        groups = [g for g in stats if g.model == model]
        for name, values in (("latency", [v for g in groups for v in g.latencies]), ("TTFT", [v for g in groups for v in g.ttft]),
                             ("TTFA", [v for g in groups for v in g.ttfa])):
            if name != "latency" and not values:
                continue   # not streamed: no first token or audio to show
            marks = [(f"p{round(q * 100)} {percentile(values, q):.3g} s", percentile(values, q)) for q in (0.5, 0.9, 0.99)] if values else []
            out.append(histogram(values, f"{model} · {name} (s)", series=index, markers=marks, width=380))
    return out
