"""Engine: one dataset–metric pair, scoring every model's records as they arrive."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Optional

from lalmeval.inference.job import InferenceJob
from lalmeval.metrics.base import Metric, SampleScore
from lalmeval.records import Record, Score
from lalmeval.stats import Uncertainty
from lalmeval.store import JsonlWriter, RunStore, WriteFailed

SCORING_FAILED = "scoring failed"


def failure_kind(reason: str) -> str:
    """A short, countable form of a failure reason: 'HTTP 429', 'timeout', 'audio', ..."""
    for prefix in ("timeout", "endpoint down", "reply too large"):
        if reason.startswith(prefix):
            return prefix
    return reason.split(":", 1)[0].strip()


class Engine:
    """Holds a dataset, its preprocessor and postprocessor (through the shared jobs), a metric and the models."""

    def __init__(self, dataset: str, metric: Metric, jobs: dict[str, InferenceJob], store: RunStore):
        self.dataset = dataset
        self.metric = metric
        self.jobs = jobs
        self.store = store

    async def run(self) -> list[Score]:
        """Score every model concurrently; each waits on the shared inference pass, not on the others."""
        return list(await asyncio.gather(*(self._score(model, job) for model, job in self.jobs.items())))

    async def _score(self, model: str, job: InferenceJob) -> Score:
        try:
            writer: Optional[JsonlWriter] = JsonlWriter(self.store.scores_path(self.dataset, self.metric.name, model), mode="w")
        except WriteFailed:
            writer = None  # the run is stopping on the disk error; score in memory all the same
        tally = _Tally(writer)
        try:
            await self._consume(job, tally)
        finally:
            tally.close()
        # Batches finish in any order: sorted by id, sums and bootstrap resamples repeat exactly run to run.
        tally.items.sort(key=lambda x: x["id"])
        value, details = self._aggregate(tally.items)
        if tally.failures:
            details["failures"] = dict(tally.failures)
        uncertainty, stats = await self._uncertainty(tally.items, value, details)
        return Score(model, self.dataset, self.metric.name, value, tally.total, sum(tally.failures.values()), details,
                     uncertainty.ci95, uncertainty.stderr, stats)

    async def _consume(self, job: InferenceJob, tally: "_Tally") -> None:
        # Each batch is scored as soon as it arrives, while inference (and earlier batches) go on.
        pending: list[asyncio.Task] = []
        try:
            async for batch in job.stream.batches():
                tally.total += len(batch)
                for record in batch:
                    if record.failed:
                        tally.fail(record, record.error or "")
                ok = [r for r in batch if not r.failed]
                if ok:
                    pending.append(asyncio.ensure_future(self._score_batch(ok, tally)))
            await asyncio.gather(*pending)
        finally:
            for task in pending:
                task.cancel()

    async def _score_batch(self, records: list[Record], tally: "_Tally") -> None:
        """A metric that raises fails the scores of this batch, with its reason; the others stand."""
        try:
            items = await self.metric.score_records(records)
            if len(items) != len(records):
                raise RuntimeError(f"metric returned {len(items)} scores for {len(records)} records")
        except Exception as exc:  # noqa: BLE001 - any metric bug must end as recorded failures
            for record in records:
                tally.fail(record, f"{SCORING_FAILED}: {type(exc).__name__}: {exc}")
            return
        for record, item in zip(records, items):
            tally.add(record, item)

    async def _uncertainty(self, items: list[SampleScore], value: Optional[float], details: dict[str, Any]) -> tuple[Uncertainty, Any]:
        """The interval and per-sample statistics, off the event loop: resampling 100k samples takes a second or two."""
        loop = asyncio.get_running_loop()
        try:
            uncertainty, stats = await loop.run_in_executor(None, lambda: (self.metric.uncertainty(items, value), self.metric.sample_stats(items)))
        except Exception as exc:  # noqa: BLE001 - the score stands; only its interval is missing, and says why
            details["interval_error"] = f"{type(exc).__name__}: {exc}"
            return Uncertainty(), None
        if uncertainty.method:
            details["interval"] = uncertainty.method
        return uncertainty, stats

    def _aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        try:
            return self.metric.aggregate(items)
        except Exception as exc:  # noqa: BLE001 - a score that cannot be computed is None with its reason
            return None, {"error": f"{SCORING_FAILED}: {type(exc).__name__}: {exc}"}


class _Tally:
    """What one (model, dataset, metric) has seen: per-sample scores, failures by kind, one line each."""

    def __init__(self, writer: Optional[JsonlWriter]):
        self.writer = writer
        self.items: list[SampleScore] = []
        self.failures: Counter[str] = Counter()
        self.total = 0

    def _write(self, line: dict[str, Any]) -> None:
        if self.writer is not None:
            try:
                self.writer.write(line)
            except WriteFailed:
                self.writer = None

    def fail(self, record: Record, reason: str) -> None:
        self.failures[failure_kind(reason)] += 1
        self._write({"id": record.id, "score": None, "error": reason})

    def add(self, record: Record, item: SampleScore) -> None:
        line = {"id": record.id, **item}  # the id also pairs samples across models
        self.items.append(line)
        self._write(line)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
