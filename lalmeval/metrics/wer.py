"""word_error_rate: corpus WER (CER for languages written without spaces) after normalization."""

from __future__ import annotations

from typing import Any, Optional

import jiwer

from lalmeval.languages import uses_characters
from lalmeval.metrics.base import METRICS, Metric, SampleScore
from lalmeval.metrics.normalize import normalize_basic, normalize_english
from lalmeval.records import Record


def _tokens(text: str, language: str) -> list[str]:
    if language == "en":
        return normalize_english(text).split()
    normalized = normalize_basic(text)
    return list(normalized.replace(" ", "")) if uses_characters(language) else normalized.split()


def edit_counts(reference: list[str], hypothesis: list[str]) -> tuple[int, int, int]:
    """(substitutions, deletions, insertions) aligning hypothesis to reference tokens."""
    if not reference:
        return 0, 0, len(hypothesis)
    if not hypothesis:
        return 0, len(reference), 0
    out = jiwer.process_words(" ".join(reference), " ".join(hypothesis))
    return out.substitutions, out.deletions, out.insertions


@METRICS.register("word_error_rate")
class WordErrorRate(Metric):
    """Σ(S+D+I) / Σ(reference tokens), reported as a percentage."""

    name = "word_error_rate"

    def score_record(self, record: Record) -> SampleScore:
        language = self.dataset.iso_language
        ref = _tokens(record.reference or "", language)
        hyp = _tokens(record.prediction or "", language)
        s, d, i = edit_counts(ref, hyp)
        errors = s + d + i
        return {
            "score": errors / len(ref) if ref else None,
            "errors": errors, "substitutions": s, "deletions": d, "insertions": i,
            "ref_tokens": len(ref), "reference_norm": " ".join(ref), "prediction_norm": " ".join(hyp),
        }

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        ref_total = sum(x["ref_tokens"] for x in items)
        errors = sum(x["errors"] for x in items)
        per_sample = [x["score"] for x in items if x["score"] is not None]
        unit = "character" if uses_characters(self.dataset.iso_language) else "word"
        details = {
            "unit": unit,
            "corpus_wer": errors / ref_total if ref_total else None,
            "mean_sample_wer": sum(per_sample) / len(per_sample) if per_sample else None,
            "substitutions": sum(x["substitutions"] for x in items),
            "deletions": sum(x["deletions"] for x in items),
            "insertions": sum(x["insertions"] for x in items),
            "reference_tokens": ref_total,
            "empty_references": len(items) - len(per_sample),
            "normalizer": "english" if self.dataset.iso_language == "en" else "basic",
        }
        return (100.0 * errors / ref_total if ref_total else None), details
