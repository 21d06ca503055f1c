"""Metrics, looked up by name from config.yaml and runspecs."""

from lalmeval.metrics.base import METRICS, Metric, MetricContext
from lalmeval.metrics import accuracy, diarization, judge, text, wer  # noqa: F401  (register the built-in metrics)

__all__ = ["METRICS", "Metric", "MetricContext"]
