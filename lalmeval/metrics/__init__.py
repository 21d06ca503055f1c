"""Metrics and text normalizers, looked up by name from config.yaml and runspecs."""

from lalmeval.metrics.base import METRICS, Metric, MetricContext
from lalmeval.metrics.normalize import NORMALIZERS, Normalizer
from lalmeval.metrics import accuracy, au_harness, bertscore, bleu, chinese, diarization, judge, meteor, open_asr, qwen_asr, rouge, wer  # noqa: F401  (register the built-ins)

__all__ = ["METRICS", "Metric", "MetricContext", "NORMALIZERS", "Normalizer"]
