"""Sample selection: the runspec's keep_subsets, language, accent, clip length and sample count — decided from light fields only."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Optional

from lalmeval.catalog.runspecs import Dataset
from lalmeval.config.languages import iso_code
from lalmeval.config.schema import Filters
from lalmeval.data.audio_cells import audio_refs
from lalmeval.data.cells import cell_text
from lalmeval.data.confine import DataFolders
from lalmeval.errors import UserError
from lalmeval.media.audio import duration
from lalmeval.results.records import AudioRef


def skip_reason(dataset: Dataset, filters: Filters) -> Optional[str]:
    """Why the filters exclude this whole dataset, or None to keep it."""
    if filters.language and not dataset.spec.language_column:
        wanted = iso_code(filters.language, where="filters.language")
        if dataset.iso_language not in (wanted, "mul"):
            return f"filters.language '{wanted}': its language is {dataset.iso_language}"
    if filters.accented is not None and dataset.spec.accented != filters.accented:
        return f"filters.accented {str(filters.accented).lower()}: it is {'accented' if dataset.spec.accented else 'not accented'}"
    return None


def _language_ok(value: Any, wanted: str) -> bool:
    try:
        return value is not None and iso_code(str(value)) == wanted
    except UserError:  # an unknown row language simply does not match
        return False


def _subset_of(value: Any, column: str) -> Optional[str]:
    """A subset cell as the text keep_subsets names (the rule of lalmeval.data.cells); None when it has none."""
    try:
        return cell_text(value, column)
    except ValueError:  # a cell that is no text names no subset: the row is not kept
        return None


def clip_seconds(value: Any, base: Path, folders: Optional[DataFolders] = None) -> Optional[float]:
    """Total seconds of a row's audio from headers (or spans) alone; None when a header cannot be read
    (or may not be: a file outside the data's `folders` is kept, so that its row fails with the reason)."""
    total = 0.0
    try:
        refs = audio_refs(value, base)
        if folders is not None:
            refs = tuple(AudioRef(folders.check(r.source, "audio file"), r.span) if isinstance(r.source, str) else r for r in refs)
    except ValueError:  # a malformed clip value or a refused file: kept, so that its row fails with the reason
        return None
    for ref in refs:
        seconds = ref.span[1] - ref.span[0] if ref.span else duration(ref.source)
        if seconds is None:
            return None
        total += seconds
    return total if refs else None


class RowFilter:
    """The per-row filters (the runspec's keep_subsets, language column, clip length); whole-dataset filters are skip_reason's."""

    def __init__(self, dataset: Dataset, filters: Filters, base: Path, folders: Optional[DataFolders] = None):
        spec = dataset.spec
        self.subsets = (spec.subset_column, set(spec.keep_subsets)) if spec.keep_subsets and spec.subset_column else None
        self.language = spec.language_column if filters.language and spec.language_column else None
        self.wanted = iso_code(filters.language, where="filters.language") if self.language else None
        self.audio = spec.audio_column if filters.length_filter and spec.modality != "text" else None
        self.audio = [self.audio] if isinstance(self.audio, str) else self.audio
        self.bounds, self.base, self.folders = filters.length_filter, base, folders

    def reject(self, row: dict[str, Any]) -> Optional[str]:
        """The filter that leaves this row out ('keep_subsets', 'filters.language', 'filters.length_filter'), or None to keep it."""
        if self.subsets and _subset_of(row.get(self.subsets[0]), self.subsets[0]) not in self.subsets[1]:
            return "keep_subsets"
        if self.language and not _language_ok(row.get(self.language), self.wanted):
            return "filters.language"
        if self.audio and self.bounds:
            # A clip whose length cannot be read is kept: it fails at decode with its reason recorded.
            values: list[Any] = []
            for column in self.audio:  # several clip columns (audio_1, audio_2, ...) count together
                value = row.get(column)
                values += list(value) if isinstance(value, (list, tuple)) else [value]
            seconds = clip_seconds(values, self.base, self.folders)
            if seconds is not None and not self.bounds[0] <= seconds <= self.bounds[1]:
                return "filters.length_filter"
        return None

    def keep(self, row: dict[str, Any]) -> bool:
        return self.reject(row) is None

    def describe(self, key: str) -> str:
        """A filter as the config (or runspec) sets it: "filters.length_filter [1, 2] s", "filters.language 'zh' (column lang)"."""
        if key == "keep_subsets" and self.subsets:
            return f"keep_subsets {sorted(self.subsets[1])} (subset_column '{self.subsets[0]}')"
        if key == "filters.language":
            return f"filters.language '{self.wanted}' (language_column '{self.language}')"
        return f"filters.length_filter [{self.bounds[0]:g}, {self.bounds[1]:g}] s"


class Selection:
    """How many rows were read and which filter left how many out: why a selection may be empty."""

    def __init__(self) -> None:
        self.rows = 0
        self.dropped: dict[str, int] = {}

    def count(self, rejected: Optional[str]) -> None:
        self.rows += 1
        if rejected is not None:
            self.dropped[rejected] = self.dropped.get(rejected, 0) + 1

    def empty(self, name: str, keep: "RowFilter") -> str:
        """The one line that says a dataset kept no sample, naming the filters that left its rows out."""
        dropped = ", ".join(f"{keep.describe(key)} left out {count}" for key, count in self.dropped.items())
        return f"dataset '{name}': no sample selected — {dropped} of its {self.rows} row(s)"


def sample_count(selected: list[int], filters: Filters, seed: int) -> list[int]:
    """num_samples of the kept row indices: the first N, or N drawn with `seed` (kept in file order)."""
    if filters.num_samples and len(selected) > filters.num_samples:
        if not filters.shuffle:
            return selected[: filters.num_samples]
        chosen = sorted(random.Random(seed).sample(range(len(selected)), filters.num_samples))
        return [selected[i] for i in chosen]
    return selected
