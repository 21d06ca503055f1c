"""The latency a user feels, per model and dataset: p50/p90/p99 of time to first token and first audio, pace and real-time factor."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from lalmeval.results.records import Record

PERCENTILES = (50, 90, 99)
# Record field -> name in details.latency; seconds unless said otherwise.
MEASURES = (("ttft", "ttft"), ("ttfa", "ttfa"), ("latency", "total"), ("tokens_per_second", "tokens_per_second"), ("rtf", "rtf"))


class LatencyTally:
    """The timings of one (model, dataset)'s answered records, gathered as they arrive."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {field: [] for field, _ in MEASURES}

    def add(self, record: Record) -> None:
        if record.failed:
            return   # a failure's time is its retries' and timeouts', not an answer's
        for field, _ in MEASURES:
            value = getattr(record, field, None)
            if isinstance(value, (int, float)) and value >= 0:
                self.values[field].append(float(value))

    def summary(self) -> Optional[dict[str, Any]]:
        """details.latency: each measure's p50/p90/p99, mean and count; None when no reply was streamed or spoken."""
        if not (self.values["ttft"] or self.values["ttfa"] or self.values["rtf"]):
            return None
        out: dict[str, Any] = {}
        for field, name in MEASURES:
            values = self.values[field]
            if values:
                found = np.percentile(np.asarray(values), PERCENTILES)
                out[name] = {**{f"p{p}": round(float(v), 4) for p, v in zip(PERCENTILES, found)},
                             "mean": round(float(np.mean(values)), 4), "n": len(values)}
        return out
