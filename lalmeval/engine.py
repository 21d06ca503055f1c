"""Engine: one dataset–metric pair, scoring every model's records as they arrive."""

from __future__ import annotations

import asyncio
from collections import Counter

from lalmeval.inference.job import InferenceJob
from lalmeval.metrics.base import Metric, SampleScore
from lalmeval.records import Record, Score
from lalmeval.store import JsonlWriter, RunStore


def failure_kind(reason: str) -> str:
    """A short, countable form of a failure reason: 'HTTP 429', 'timeout', 'audio', ..."""
    for prefix in ("timeout", "endpoint down"):
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
        writer = JsonlWriter(self.store.scores_path(self.dataset, self.metric.name, model), mode="w")
        items: list[SampleScore] = []
        failures: Counter[str] = Counter()
        total = 0

        async def score(ok: list[Record]) -> None:
            for record, item in zip(ok, await self.metric.score_records(ok)):
                line = {"id": record.id, **item}  # the id also pairs samples across models
                writer.write(line)
                items.append(line)

        # Each batch is scored as soon as it arrives, while inference (and earlier batches) go on.
        pending: list[asyncio.Task] = []
        try:
            async for batch in job.stream.batches():
                total += len(batch)
                for record in batch:
                    if record.failed:
                        failures[failure_kind(record.error or "")] += 1
                        writer.write({"id": record.id, "score": None, "error": record.error})
                ok = [r for r in batch if not r.failed]
                if ok:
                    pending.append(asyncio.ensure_future(score(ok)))
            await asyncio.gather(*pending)
        finally:
            for task in pending:
                task.cancel()
            writer.close()
        # Batches finish in any order: sorted by id, sums and bootstrap resamples repeat exactly run to run.
        items.sort(key=lambda x: x["id"])
        value, details = self.metric.aggregate(items)
        if failures:
            details["failures"] = dict(failures)
        # Resampling 100k samples takes a second or two: off the event loop.
        loop = asyncio.get_running_loop()
        uncertainty, stats = await loop.run_in_executor(None, lambda: (self.metric.uncertainty(items, value), self.metric.sample_stats(items)))
        if uncertainty.method:
            details["interval"] = uncertainty.method
        return Score(model, self.dataset, self.metric.name, value, total, sum(failures.values()), details,
                     uncertainty.ci95, uncertainty.stderr, stats)

