"""word_error_rate: corpus error rate over words, characters or mixed units, after a named normalizer."""

from __future__ import annotations

import functools
from typing import Any, Optional

import jiwer

from lalmeval.config.languages import default_error_unit, default_normalizer
from lalmeval.metrics.base import METRICS, Metric, SampleScore, empty_reference, sample_stats, unscored
from lalmeval.metrics.compounds import compound_edit_counts
from lalmeval.metrics.normalize import normalizer, require, units_of
from lalmeval.metrics.reading import judged_texts, read_text, reading_details, reading_mode, text_fields
from lalmeval.postprocess.reading import TextReading
from lalmeval.results.records import Record
from lalmeval.catalog.runspecs import Dataset
from lalmeval.stats import SampleStats, ratio


def edit_counts(reference: list[str], hypothesis: list[str], merge_compounds: bool = False) -> tuple[int, int, int]:
    """(substitutions, deletions, insertions) aligning hypothesis to reference tokens (see metrics/compounds.py for merge_compounds)."""
    if not reference:
        return 0, 0, len(hypothesis)
    if not hypothesis:
        return 0, len(reference), 0
    if merge_compounds:
        return compound_edit_counts(reference, hypothesis)
    # Tokens never hold spaces (see split_units), so jiwer splits the joined text back into the same tokens.
    out = jiwer.process_words(" ".join(reference), " ".join(hypothesis))
    return out.substitutions, out.deletions, out.insertions


class Units:
    """What an error rate counts for one dataset: its normalizer (runspec `normalizer`, else the
    language default), then its unit (runspec `error_unit`, else the language default)."""

    def __init__(self, dataset: Dataset):
        self.normalizer_name = dataset.spec.normalizer or default_normalizer(dataset.iso_language)
        self.unit = dataset.spec.error_unit or default_error_unit(dataset.iso_language)
        self.normalizer = normalizer(self.normalizer_name, dataset.iso_language)

    def __call__(self, text: str) -> list[str]:
        return units_of(self.normalizer, text, self.unit)


class UnitMetric(Metric):
    """A metric that counts normalized units of text (the dataset's `Units`)."""

    @classmethod
    def reads_fields(cls, dataset: Dataset) -> frozenset[str]:
        return frozenset({"normalizer", "error_unit"})

    @classmethod
    def check_dataset(cls, dataset: Dataset) -> None:
        """Refuse to start when the dataset's normalizer needs a package that is not installed."""
        require(dataset.spec.normalizer or default_normalizer(dataset.iso_language), f"{dataset.source}: dataset '{dataset.name}'", dataset.iso_language)

    @functools.cached_property
    def units(self) -> Units:
        return Units(self.dataset)


@METRICS.register("word_error_rate")
class WordErrorRate(UnitMetric):
    """Σ(S+D+I) / Σ(reference tokens), reported as a percentage."""

    name = "word_error_rate"
    lower_is_better = True
    display_fields = frozenset({"reference_norm", "prediction_norm", "read"})

    @classmethod
    def needs_judge(cls, dataset: Dataset) -> bool:
        return dataset.spec.reading == "judge"

    @property
    def normalizer_name(self) -> str:
        return self.units.normalizer_name

    @property
    def unit(self) -> str:
        return self.units.unit

    def tokens(self, text: str) -> list[str]:
        """Normalized units of a text: what the error rate counts."""
        return self.units(text)

    def score_record(self, record: Record) -> SampleScore:
        return self.score_read(record, read_text(record.prediction or "", reading_mode(self.dataset, self.context)))

    def score_read(self, record: Record, reading: TextReading) -> SampleScore:
        """The sample's errors with `reading.text` as its transcript."""
        ref = self.tokens(record.reference or "")
        hyp = self.tokens(reading.text)
        if (empty := empty_reference(record.reference, ref)) is not None:
            return unscored(empty, prediction_norm=" ".join(hyp))
        s, d, i = edit_counts(ref, hyp, self.units.normalizer.merge_compounds)
        errors = s + d + i
        return {
            "score": errors / len(ref),
            "errors": errors, "substitutions": s, "deletions": d, "insertions": i,
            "ref_tokens": len(ref), "reference_norm": " ".join(ref), "prediction_norm": " ".join(hyp),
            **text_fields(reading),
        }

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        if reading_mode(self.dataset, self.context) != "judge" or self.context.judge is None:
            return await super().score_records(records)
        return await judged_texts(self, records, "transcript")

    def sample_stats(self, items: list[SampleScore]) -> Optional[SampleStats]:
        return sample_stats(items, lambda x: (x["errors"], x["ref_tokens"]), ratio(100.0))

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        scored = [x for x in items if x["score"] is not None]
        ref_total = sum(x["ref_tokens"] for x in scored)
        errors = sum(x["errors"] for x in scored)
        details = {
            "unit": self.unit,
            "normalizer": self.normalizer_name,
            "alignment": "levenshtein, compounds merged" if self.units.normalizer.merge_compounds else "levenshtein",
            "corpus_wer": errors / ref_total if ref_total else None,
            "mean_sample_wer": sum(x["score"] for x in scored) / len(scored) if scored else None,
            "substitutions": sum(x["substitutions"] for x in scored),
            "deletions": sum(x["deletions"] for x in scored),
            "insertions": sum(x["insertions"] for x in scored),
            "reference_tokens": ref_total,
            "scored": len(scored),
            "reading": reading_details(items, reading_mode(self.dataset, self.context)),
        }
        return (100.0 * errors / ref_total if ref_total else None), details

