"""PercentCorrect: a metric whose samples are right (1) or wrong (0), reported as a percentage."""

from __future__ import annotations

from typing import Any, Optional

from lalmeval.metrics.base import Metric, SampleScore, sample_stats
from lalmeval.stats import SampleStats, Uncertainty, ratio, wilson


class PercentCorrect(Metric):
    """Share of scored samples judged correct, 0-100, with a Wilson interval; unscorable samples ('score' None) are counted apart."""

    def sample_stats(self, items: list[SampleScore]) -> Optional[SampleStats]:
        return sample_stats(items, lambda x: (x["score"], 1.0), ratio(100.0))

    def uncertainty(self, items: list[SampleScore], score: Optional[float]) -> Uncertainty:
        scored = [x["score"] for x in items if x["score"] is not None]
        if score is None or self.context.resamples <= 0:
            return Uncertainty()
        return wilson(sum(scored), len(scored))

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        scored = [x["score"] for x in items if x["score"] is not None]
        details: dict[str, Any] = {"scored": len(scored), "unscorable": len(items) - len(scored)}
        return (100.0 * sum(scored) / len(scored) if scored else None), details
