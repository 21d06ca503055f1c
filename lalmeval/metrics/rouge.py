"""rouge: mean ROUGE-1/2/L F1 from rouge-score; the score is ROUGE-L."""

from __future__ import annotations

import functools
from typing import Any, Optional

from lalmeval.catalog.runspecs import Dataset
from lalmeval.config.languages import default_error_unit, default_normalizer
from lalmeval.metrics.base import METRICS, MeanMetric, SampleScore, empty_reference, text_pair, unscored
from lalmeval.metrics.normalize import normalizer, units_of
from lalmeval.results.records import Record


class _Tokens:
    """rouge-score's tokenizer interface over the dataset's normalizer and error unit."""

    def __init__(self, normalizer_name: str, unit: str, language: str):
        self.normalizer_name, self.unit, self.language = normalizer_name, unit, language

    def tokenize(self, text: str) -> list[str]:
        return units_of(normalizer(self.normalizer_name, self.language), text, self.unit)


@METRICS.register("rouge")
class Rouge(MeanMetric):
    """Mean ROUGE-1/2/L F1. English: rouge-score's tokenizer and Porter stemmer; other languages: the
    runspec's normalizer and error unit (rouge-score's default tokenizer drops non-ASCII letters)."""

    name = "rouge"

    @classmethod
    def reads_fields(cls, dataset: Dataset) -> frozenset[str]:
        # English goes through rouge-score's own tokenizer and stemmer; other languages through the normalizer.
        return frozenset() if dataset.iso_target_language == "en" else frozenset({"normalizer", "error_unit"})

    @functools.cached_property
    def _scorer(self) -> Any:
        from rouge_score import rouge_scorer

        language = self.dataset.iso_target_language
        if language == "en":
            options: dict[str, Any] = {"use_stemmer": True}
        else:
            spec = self.dataset.spec
            options = {"tokenizer": _Tokens(spec.normalizer or default_normalizer(language), spec.error_unit or default_error_unit(language), language)}
        return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], **options)

    def score_record(self, record: Record) -> SampleScore:
        hypothesis, reference = text_pair(record)
        if (empty := empty_reference(reference, reference and self._scorer._tokenizer.tokenize(reference))) is not None:
            return unscored(empty)
        values = {name: 100.0 * s.fmeasure for name, s in self._scorer.score(reference, hypothesis).items()}
        return {"score": values["rougeL"], **values}

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        kept = [x for x in items if x["score"] is not None]
        if not kept:
            return None, {"scored": 0}
        means = {name: sum(x[name] for x in kept) / len(kept) for name in ("rouge1", "rouge2", "rougeL")}
        tokens = getattr(self._scorer, "_tokenizer", None)
        tokenizer = (f"normalizer {tokens.normalizer_name}, unit {tokens.unit}" if isinstance(tokens, _Tokens)
                     else "rouge-score default, Porter stemmer")
        return means["rougeL"], {**means, "tokenizer": tokenizer, "scored": len(kept)}
