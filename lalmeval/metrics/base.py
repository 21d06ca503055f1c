"""The metric interface and its registry."""

from __future__ import annotations

import asyncio
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

import numpy as np

from lalmeval.config.schema import Config
from lalmeval.postprocess.base import Postprocessor
from lalmeval.results.records import Record
from lalmeval.registry import Registry
from lalmeval.catalog.runspecs import Dataset
from lalmeval.stats import SampleStats, Statistic, Uncertainty, bootstrap, ratio, t_interval

if TYPE_CHECKING:
    from lalmeval.judging.judge import Judge
    from lalmeval.judging.transcriber import Transcriber

SampleScore = dict[str, Any]


@dataclass(frozen=True)
class MetricContext:
    """Run-wide services and settings a metric may use: the judge (llm_judge_*), the transcriber (speech_*), the bootstrap's size and seed."""

    judge: Optional["Judge"] = None
    transcriber: Optional["Transcriber"] = None  # config `transcriber`: speech_wer, speech_consistency
    resamples: int = 1000  # config bootstrap_resamples; 0: no intervals
    seed: int = 0
    reading: str = "careful"  # config reading: how replies are read where the runspec does not say (docs/reading.md)


class Metric:
    """Scores successful records one by one, then aggregates; failed records never reach it."""

    name = ""
    lower_is_better = False   # an error rate: a rise is a regression (lalmeval compare, leaderboards)
    # Per-sample fields written to the scores file for people to read, never read by aggregate or
    # sample_stats: they are not kept in memory, which then grows by a few numbers per sample.
    display_fields: frozenset[str] = frozenset()

    def __init__(self, dataset: Dataset, postprocessor: Postprocessor, context: MetricContext = MetricContext()):
        self.dataset = dataset
        self.postprocessor = postprocessor
        self.context = context

    @classmethod
    def check(cls, config: Config) -> None:
        """Refuse to start (UserError) when the metric cannot run: a missing extra, judge or data."""

    def score_record(self, record: Record) -> SampleScore:
        """Per-sample result; must hold 'score' (None when the sample cannot be scored)."""
        raise NotImplementedError

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        """The overall score (None when nothing could be scored) and its details."""
        raise NotImplementedError

    # True where the dataset's protocol itself (the peer it names) changes how the metric scores, beyond the fields
    # the protocol presets: a peer's judge reading, its text preparation before BLEU or METEOR.
    reads_protocol = False

    @classmethod
    def reads_fields(cls, dataset: Dataset) -> frozenset[str]:
        """The runspec fields that only scoring reads (normalizer, error_unit) this metric reads on `dataset`: a
        `protocol` presetting none of them cannot change its score."""
        return frozenset()

    @classmethod
    def check_dataset(cls, dataset: Dataset) -> None:
        """Refuse to start (UserError) when the metric cannot score this dataset, e.g. a tokenizer is missing."""

    def sample_stats(self, items: list[SampleScore]) -> Optional[SampleStats]:
        """Per-sample sufficient statistics whose column sums give the score (None: nothing to resample)."""
        return None

    def uncertainty(self, items: list[SampleScore], score: Optional[float]) -> Uncertainty:
        """The score's ci95 and stderr: a bootstrap over sample_stats unless the metric has an analytic interval."""
        stats = self.sample_stats(items)
        if score is None or stats is None or self.context.resamples <= 0:
            return Uncertainty()
        return bootstrap(stats, score, self.context.resamples, self.context.seed)

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        """Score a batch off the event loop; metrics that call services override this."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: [self.score_record(r) for r in records])


METRICS: Registry[type[Metric]] = Registry("metric")


def sample_stats(items: list[SampleScore], row: Callable[[SampleScore], Sequence[float]], statistic: Statistic) -> Optional[SampleStats]:
    """SampleStats of the scored items (score not None), one row each, keyed by sample id."""
    kept = [(str(x.get("id", i)), row(x)) for i, x in enumerate(items) if x.get("score") is not None]
    if not kept:
        return None
    return SampleStats(tuple(i for i, _ in kept), np.asarray([r for _, r in kept], dtype=np.float64), statistic)


def text_pair(record: Record) -> tuple[str, str]:
    """(hypothesis, reference), stripped."""
    return (record.prediction or "").strip(), (record.reference or "").strip()


# One rule for every metric: a sample is scored only against a reference that still says something
# after the metric's own normalization. Otherwise it is not scored — never 0, never 100 % insertions —
# and the Engine counts it as failed under this reason (num_failed, details.failures).
EMPTY_REFERENCE = "empty reference"
EMPTY_AFTER_NORMALIZATION = "empty reference after normalization"


def unscored(reason: str, **fields: Any) -> SampleScore:
    """The per-sample result of a sample the metric cannot score, with why."""
    return {"score": None, "reason": reason, **fields}


def _visible(text: str) -> bool:
    """Whether a text shows anything: a character that is neither space nor an invisible format or control
    character (a zero-width space, a byte-order mark, a soft hyphen), which no normalizer removes."""
    return any(not ch.isspace() and unicodedata.category(ch) not in ("Cf", "Cc") for ch in text)


def empty_reference(raw: Optional[str], normalized: Any = True) -> Optional[str]:
    """Why `raw` cannot be scored against: missing or blank, or nothing left after normalization; None when it can.
    `normalized` is the reference as the metric compares it: a text, its tokens, or anything truthy."""
    if raw is None or not _visible(raw):
        return EMPTY_REFERENCE
    if isinstance(normalized, (list, tuple)):
        normalized = " ".join(map(str, normalized))
    if isinstance(normalized, str):
        return None if _visible(normalized) else EMPTY_AFTER_NORMALIZATION
    return None if normalized else EMPTY_AFTER_NORMALIZATION


class MeanMetric(Metric):
    """A score that is the mean of per-sample 'score' values: Student-t interval, [score, 1] as statistics."""

    def sample_stats(self, items: list[SampleScore]) -> Optional[SampleStats]:
        return sample_stats(items, lambda x: (x["score"], 1.0), ratio())

    def uncertainty(self, items: list[SampleScore], score: Optional[float]) -> Uncertainty:
        if score is None or self.context.resamples <= 0:
            return Uncertainty()
        return t_interval([x["score"] for x in items if x["score"] is not None])

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        kept = [x["score"] for x in items if x["score"] is not None]
        return (sum(kept) / len(kept) if kept else None), {"scored": len(kept)}
