"""Sample selection: language, accent, clip length and sample count."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Iterable, Optional

from lalmeval.config import Filters
from lalmeval.data.audio import duration
from lalmeval.languages import iso_code
from lalmeval.records import Sample
from lalmeval.runspecs import Dataset


def skip_reason(dataset: Dataset, filters: Filters) -> Optional[str]:
    """Why the filters exclude this whole dataset, or None to keep it."""
    if filters.language and not dataset.spec.language_column:
        wanted = iso_code(filters.language, where="filters.language")
        if dataset.iso_language not in (wanted, "mul"):
            return f"language {dataset.iso_language} ≠ {wanted}"
    if filters.accented is not None and dataset.spec.accented != filters.accented:
        return "accented" if dataset.spec.accented else "not accented"
    return None


def _row_language_ok(sample: Sample, wanted: str) -> bool:
    try:
        return sample.language is not None and iso_code(sample.language) == wanted
    except Exception:  # an unknown row language simply does not match
        return False


def _with_duration(sample: Sample) -> Sample:
    return replace(sample, duration=duration(sample.audio_source)) if sample.has_audio else sample


def _length_ok(sample: Sample, bounds: tuple[float, float]) -> bool:
    # A clip whose length cannot be read is kept: it fails at decode with its reason recorded.
    return sample.duration is None or bounds[0] <= sample.duration <= bounds[1]


def select(samples: Iterable[Sample], dataset: Dataset, filters: Filters, seed: int) -> list[Sample]:
    """Apply row filters, then take num_samples (first N, or a seeded draw kept in file order)."""
    wanted = iso_code(filters.language, where="filters.language") if filters.language else None
    stop_early = filters.num_samples and not filters.shuffle
    kept: list[Sample] = []
    for sample in samples:
        if wanted and dataset.spec.language_column and not _row_language_ok(sample, wanted):
            continue
        if filters.length_filter:
            sample = _with_duration(sample)
            if not _length_ok(sample, filters.length_filter):
                continue
        kept.append(sample)
        if stop_early and len(kept) >= filters.num_samples:
            break
    if filters.num_samples and filters.shuffle and len(kept) > filters.num_samples:
        chosen = sorted(random.Random(seed).sample(range(len(kept)), filters.num_samples))
        kept = [kept[i] for i in chosen]
    return kept
