"""Metrics and text normalizers, looked up by name from config.yaml and runspecs."""

from lalmeval.metrics.base import METRICS, Metric, MetricContext
from lalmeval.metrics.normalize import NORMALIZERS, Normalizer
from lalmeval.metrics import accuracy, air_bench, au_harness, bertscore, bfcl, bleu, chinese, comet, diarization, gsm8k, instruction_following, judge, meteor, open_asr, qwen_asr, rouge, speech, wer  # noqa: F401  (register the built-ins)

__all__ = ["METRICS", "Metric", "MetricContext", "NORMALIZERS", "Normalizer"]
