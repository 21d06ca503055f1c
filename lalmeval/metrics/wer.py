"""word_error_rate: corpus error rate over words, characters or mixed units, after a named normalizer."""

from __future__ import annotations

import functools
from typing import Any, Optional

import jiwer

from lalmeval.languages import default_error_unit, default_normalizer
from lalmeval.metrics.base import EMPTY_REFERENCE, METRICS, Metric, SampleScore, empty_reference, sample_stats, unscored
from lalmeval.metrics.compounds import compound_edit_counts
from lalmeval.metrics.normalize import normalizer, require, units_of
from lalmeval.metrics.peer_text import peer_name, side_by_side
from lalmeval.records import Record
from lalmeval.runspecs import Dataset
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
    def check_dataset(cls, dataset: Dataset) -> None:
        """Refuse to start when the dataset's normalizer needs a package that is not installed."""
        require(dataset.spec.normalizer or default_normalizer(dataset.iso_language), f"{dataset.source}: dataset '{dataset.name}'", dataset.iso_language)

    @functools.cached_property
    def units(self) -> Units:
        return Units(self.dataset)

    @functools.cached_property
    def own_units(self) -> Optional[Units]:
        """lalmeval's own units, when the dataset's protocol reproduces a peer whose settings differ from them."""
        own = Units(self.dataset, own=True) if peer_name(self.dataset) else None
        return own if own and (own.normalizer_name, own.unit) != (self.units.normalizer_name, self.units.unit) else None


@METRICS.register("word_error_rate")
class WordErrorRate(UnitMetric):
    """Σ(S+D+I) / Σ(reference tokens), reported as a percentage."""

    name = "word_error_rate"
    display_fields = frozenset({"reference_norm", "prediction_norm"})

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
        ref = self.tokens(record.reference or "")
        hyp = self.tokens(record.prediction or "")
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
            **({"own": self._own_counts(record)} if self.own_units else {}),
        }

    def _own_counts(self, record: Record) -> Optional[tuple[int, int]]:
        """(errors, reference tokens) under lalmeval's own normalizer and unit; None when that leaves no reference."""
        ref, hyp = self.own_units(record.reference or ""), self.own_units(record.prediction or "")
        if empty_reference(record.reference, ref) is not None:
            return None
        return sum(edit_counts(ref, hyp, self.own_units.normalizer.merge_compounds)), len(ref)

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
        step = (f"normalization: the protocol's normalizer {self.units.normalizer_name} counting {by[self.units.unit]}, "
                f"lalmeval's {self.own_units.normalizer_name} counting {by[self.own_units.unit]}")
        return {**side_by_side(peer_name(self.dataset), value, own, step), "normalizer": self.own_units.normalizer_name,
                "unit": self.own_units.unit}
