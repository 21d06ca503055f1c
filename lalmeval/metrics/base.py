"""The metric interface and its registry."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from lalmeval.config import Config

from lalmeval.postprocess.base import Postprocessor
from lalmeval.records import Record
from lalmeval.registry import Registry
from lalmeval.runspecs import Dataset

if TYPE_CHECKING:
    from lalmeval.judge import Judge

SampleScore = dict[str, Any]


@dataclass(frozen=True)
class MetricContext:
    """Run-wide services a metric may use (the judge, for llm_judge_* metrics)."""

    judge: Optional["Judge"] = None


class Metric:
    """Scores successful records one by one, then aggregates; failed records never reach it."""

    name = ""

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

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        """Score a batch off the event loop; metrics that call services override this."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: [self.score_record(r) for r in records])


METRICS: Registry[type[Metric]] = Registry("metric")
