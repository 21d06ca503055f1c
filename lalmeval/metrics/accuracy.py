"""accuracy: exact match after the postprocessor's label normalization."""

from __future__ import annotations

from typing import Any, Optional

from lalmeval.metrics.base import METRICS, Metric, SampleScore, sample_stats
from lalmeval.postprocess.labels import option_letter
from lalmeval.records import Record
from lalmeval.stats import SampleStats, Uncertainty, ratio, wilson


@METRICS.register("accuracy")
class Accuracy(Metric):
    """Percentage of predictions equal to the reference label."""

    name = "accuracy"

    def score_record(self, record: Record) -> SampleScore:
        if not record.reference or not record.reference.strip():
            return {"score": None, "reason": "empty reference"}
        reference = record.reference.strip()
        letters = len(reference.strip("()., ")) == 1 and option_letter(reference) is not None
        ref = self.postprocessor.label(reference, letters)
        pred = self.postprocessor.label(record.prediction or "", letters)
        return {"score": 1.0 if pred == ref else 0.0, "reference_label": ref, "prediction_label": pred}

    def sample_stats(self, items: list[SampleScore]) -> Optional[SampleStats]:
        return sample_stats(items, lambda x: (x["score"], 1.0), ratio(100.0))

    def uncertainty(self, items: list[SampleScore], score: Optional[float]) -> Uncertainty:
        """Wilson score interval of the proportion correct."""
        scored = [x["score"] for x in items if x["score"] is not None]
        if score is None or self.context.resamples <= 0:
            return Uncertainty()
        return wilson(sum(scored), len(scored))

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        scored = [x["score"] for x in items if x["score"] is not None]
        details = {"correct": int(sum(scored)), "scored": len(scored), "empty_references": len(items) - len(scored)}
        return (100.0 * sum(scored) / len(scored) if scored else None), details
