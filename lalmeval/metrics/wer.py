"""word_error_rate: corpus error rate over words, characters or mixed units, after a named normalizer."""

from __future__ import annotations

import functools
from typing import Any, Optional

import jiwer

from lalmeval.catalog.runspecs import Dataset
from lalmeval.config.languages import default_error_unit, default_normalizer
from lalmeval.metrics.base import (
    EMPTY_REFERENCE,
    METRICS,
    Metric,
    SampleScore,
    empty_reference,
    sample_stats,
    unscored,
)
from lalmeval.metrics.compounds import compound_edit_counts
from lalmeval.metrics.normalize import normalizer, require, units_of
from lalmeval.metrics.peer_text import peer_name, side_by_side
from lalmeval.metrics.reading import (
    judged_texts,
    read_text,
    reading_details,
    reading_mode,
    reading_step,
    text_fields,
)
from lalmeval.postprocess.reading import TextReading
from lalmeval.results.records import Record
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

    def __init__(self, dataset: Dataset, own: bool = False):
        """`own`: lalmeval's defaults for the language, whatever the runspec and its protocol set."""
        spec = None if own else dataset.spec
        self.normalizer_name = (spec and spec.normalizer) or default_normalizer(dataset.iso_language)
        self.unit = (spec and spec.error_unit) or default_error_unit(dataset.iso_language)
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

    @functools.cached_property
    def own_units(self) -> Optional[Units]:
        """lalmeval's own units, when the dataset's protocol reproduces a peer (its number is printed beside the peer's)."""
        # Under a peer protocol lalmeval's own number always differs in one step at least: the peer scores the
        # reply as written, lalmeval reads it carefully.
        return Units(self.dataset, own=True) if peer_name(self.dataset) else None


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
        empty = empty_reference(record.reference, ref)
        peer_counts = self.units.normalizer.empty_reference_tokens
        if empty is not None and (empty == EMPTY_REFERENCE or peer_counts is None):
            return unscored(empty, prediction_norm=" ".join(hyp))
        s, d, i = edit_counts(ref, hyp, self.units.normalizer.merge_compounds)
        errors = s + d + i
        total = len(ref) if empty is None else peer_counts  # the peer's count for a reference its rules emptied
        return {
            "score": errors / max(total, 1),
            "errors": errors, "substitutions": s, "deletions": d, "insertions": i,
            "ref_tokens": total, "reference_norm": " ".join(ref), "prediction_norm": " ".join(hyp),
            **text_fields(reading),
            **({"own": self._own_counts(record)} if self.own_units else {}),
        }

    def _own_counts(self, record: Record) -> Optional[tuple[int, int]]:
        """(errors, reference tokens) as lalmeval scores them: the reply read carefully, lalmeval's own normalizer and
        unit; None when that leaves no reference."""
        own_reading = read_text(record.prediction or "", "careful")
        ref, hyp = self.own_units(record.reference or ""), self.own_units(own_reading.text)
        if empty_reference(record.reference, ref) is not None:
            return None
        return sum(edit_counts(ref, hyp, self.own_units.normalizer.merge_compounds)), len(ref)

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
        value = 100.0 * errors / ref_total if ref_total else None
        if self.own_units is not None:
            details["lalmeval"] = self._own_details(scored, value)
        return value, details

    def _own_details(self, scored: list[SampleScore], value: Optional[float]) -> dict[str, Any]:
        """lalmeval's own error rate over the same samples, beside the peer's, and what separates them."""
        counts = [x["own"] for x in scored if x.get("own")]
        own_total = sum(n for _, n in counts)
        own = 100.0 * sum(e for e, _ in counts) / own_total if own_total else None
        by = {"word": "words", "character": "characters", "mixed": "mixed units"}
        steps = []
        if (self.units.normalizer_name, self.units.unit) != (self.own_units.normalizer_name, self.own_units.unit):
            steps.append(f"normalization: the protocol's normalizer {self.units.normalizer_name} counting {by[self.units.unit]}, "
                         f"lalmeval's {self.own_units.normalizer_name} counting {by[self.own_units.unit]}")
        if reading_mode(self.dataset, self.context) != "careful":
            steps.append(reading_step(reading_mode(self.dataset, self.context)))
        return {**side_by_side(peer_name(self.dataset), value, own, "; ".join(steps) or "none"),
                "normalizer": self.own_units.normalizer_name, "unit": self.own_units.unit}
