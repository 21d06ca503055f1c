"""Per-sample data for report.html: plot inputs from every sample, and browser rows within a size budget."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from lalmeval.reports.rundir import RunDir
from lalmeval.store import RunStore

# report.html must open in a browser for any run size: the per-sample rows it embeds are capped
# (README, "Reports"). The plots always use every sample.
MAX_SAMPLE_BYTES = 4_000_000
MAX_FIELD_CHARS = 2_000
RECORD_FIELDS = ("prompt", "reference", "prediction", "reply", "error", "latency", "attempts")


@dataclass
class GroupStats:
    """Every sample's latency and per-metric score for one (dataset, model)."""

    dataset: str
    model: str
    metrics: list[str]
    total: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)
    scores: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class SampleTable:
    """Compact browser rows: strings are stored once in `strings` and rows refer to them by index.

    A row: [group, sample id, prompt, reference, prediction, reply, error, scores per metric,
    latency, repeat (None when the run has no repeats)]; texts are indexes into `strings`."""

    groups: list[dict[str, Any]] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    total: int = 0
    truncated: int = 0
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    def payload(self) -> dict[str, Any]:
        """What the page's script reads."""
        return {"groups": self.groups, "strings": self.strings, "rows": self.rows, "total": self.total}

    def encode(self, head: list[Any], texts: list[Optional[str]], tail: list[Any], budget: int) -> Optional[tuple[list[Any], int]]:
        """The row head + string slots + tail and its size in bytes, or None when it does not fit the budget."""
        new = {t for t in texts if t is not None and t not in self._index}
        cost = sum(len(json.dumps(t, ensure_ascii=False).encode()) + 1 for t in new)
        # A new string's index is not known yet; the next free one is close enough for a size.
        slots = [None if t is None else self._index.get(t, len(self._index)) for t in texts]
        cost += len(json.dumps(head + slots + tail, ensure_ascii=False).encode()) + 1
        if cost > budget:
            return None
        for text in texts:
            if text is not None and text not in self._index:
                self._index[text] = len(self.strings)
                self.strings.append(text)
        return head + [None if t is None else self._index[t] for t in texts] + tail, cost


def _cut(text: Optional[str]) -> Optional[str]:
    if text is None or len(text) <= MAX_FIELD_CHARS:
        return text
    return text[:MAX_FIELD_CHARS] + f" … [{len(text) - MAX_FIELD_CHARS} more characters in records/]"


def _errors(record: dict[str, Any], per_metric: list[Optional[dict[str, Any]]], metrics: list[str]) -> Optional[str]:
    """The sample's failure reason, and any judge failure, in full."""
    reasons = [record["error"]] if record.get("error") else []
    reasons += [f"{m}: {item['judge_failed']}" for m, item in zip(metrics, per_metric) if item and item.get("judge_failed")]
    return "\n".join(reasons) or None


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _group(run: RunDir, index: int, dataset: str, model: str, metrics: list[str], table: SampleTable, budget: int) -> tuple[GroupStats, int]:
    """Read one (dataset, model): stats from every record (each repeat of a sample is one), browser rows
    (failed first) while the budget lasts, listed by sample id and repeat."""
    stats = GroupStats(dataset, model, metrics, scores={m: [] for m in metrics})
    scores = [run.sample_scores(dataset, m, model, keep=("score", "judge_failed")) for m in metrics]
    records = sorted(run.records(dataset, model, keep=RECORD_FIELDS).items())
    repeated = any(repeat for (_, repeat), _ in records)
    candidates = []
    for order, (unit, record) in enumerate(records):
        per_metric = [s.get(unit) for s in scores]
        values = [_number(item.get("score")) if item else None for item in per_metric]
        for metric, value in zip(metrics, values):
            if value is not None:
                stats.scores[metric].append(value)
        if record.get("error"):
            stats.failed += 1
        elif record.get("attempts") and _number(record.get("latency")) is not None:
            stats.latencies.append(float(record["latency"]))  # answered by the endpoint, not by the cache
        error = _errors(record, per_metric, metrics)
        candidates.append((error is None, order, unit, record, values, error))
    stats.total = len(records)
    used, kept = 0, []
    for _, order, (sample_id, repeat), record, values, error in sorted(candidates, key=lambda c: c[:2]):
        raw = [record.get(k) for k in ("prompt", "reference", "prediction", "reply")] + [error]
        tail = [values, _number(record.get("latency")), repeat if repeated else None]
        encoded = table.encode([index, sample_id], [_cut(t) for t in raw], tail, budget - used)
        if encoded is None:
            break
        used += encoded[1]
        kept.append((order, encoded[0]))
        table.truncated += sum(1 for t in raw if t is not None and len(t) > MAX_FIELD_CHARS)
    table.rows.extend(row for _, row in sorted(kept, key=lambda k: k[0]))  # back in (id, repeat) order
    return stats, used


def collect(run: RunDir, max_bytes: int = MAX_SAMPLE_BYTES) -> tuple[list[GroupStats], SampleTable]:
    """Stats for the plots and the browser rows of a run; small groups go first so large ones share what is left."""
    groups = run.groups()
    store = RunStore(run.path)
    sizes = [store.records_path(d, m).stat().st_size if store.records_path(d, m).exists() else 0 for d, m, _ in groups]
    table = SampleTable(groups=[{"dataset": d, "model": m, "metrics": ms} for d, m, ms in groups])
    stats: list[Optional[GroupStats]] = [None] * len(groups)
    left = max_bytes
    for done, i in enumerate(sorted(range(len(groups)), key=lambda i: sizes[i])):
        dataset, model, metrics = groups[i]
        stats[i], used = _group(run, i, dataset, model, metrics, table, left // (len(groups) - done))
        left -= used
    table.total = sum(s.total for s in stats if s)
    table.rows.sort(key=lambda row: row[0])  # stable: (id, repeat) order within each group
    return [s for s in stats if s], table
