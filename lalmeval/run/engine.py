"""Engine: one dataset–metric pair, scoring every model's records as they arrive."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Optional

import numpy as np

from lalmeval.inference.job import InferenceJob
from lalmeval.metrics.base import Metric, SampleScore
from lalmeval.results.records import Record, Score, failure_kind
from lalmeval.results.store import JsonlWriter, RunStore, WriteFailed
from lalmeval.results.usage import JUDGE_USAGE, Usage
from lalmeval.run.latency import LatencyTally
from lalmeval.stats import Uncertainty, bootstrap

SCORING_FAILED = "scoring failed"
BATCHES_SCORING = 8  # batches scored at once per model; more waits, and so (through the stream) does inference
# Seconds a batch waits after its first record for more. Records arrive one at a time, and a batch of one cost
# more in its hand-off to a scoring thread (and its wake-ups) than in its scoring; a score is not needed sooner.
BATCH_LINGER = 0.1
JUDGE_FAILED = "judge failed"


class Engine:
    """Holds a dataset, its preprocessor and postprocessor (through the shared jobs), a metric and the models."""

    def __init__(self, dataset: str, metric: Metric, jobs: dict[str, InferenceJob], store: RunStore):
        self.dataset = dataset
        self.metric = metric
        self.jobs = jobs
        self.store = store
        self.readers = {model: job.stream.subscribe() for model, job in jobs.items()}

    async def run(self) -> list[Score]:
        """Score every model concurrently; each waits on the shared inference pass, not on the others."""
        return list(await asyncio.gather(*(self._score(model, job) for model, job in self.jobs.items())))

    async def _score(self, model: str, job: InferenceJob) -> Score:
        try:
            writer: Optional[JsonlWriter] = JsonlWriter(self.store.scores_path(self.dataset, self.metric.name, model), mode="w")
        except WriteFailed:
            writer = None  # the run is stopping on the disk error; score in memory all the same
        tally = _Tally(writer, self.metric.display_fields)
        judge_usage = Usage()
        JUDGE_USAGE.set(judge_usage)   # this model's scoring tasks inherit it: the judge counts its replies there
        try:
            await self._consume(job, self.readers[model], tally)
        finally:
            tally.close()
        # Batches finish in any order: sorted, sums and bootstrap resamples repeat exactly run to run.
        tally.items.sort(key=lambda x: (x["id"], x.get("repeat", 0)))
        tally.exclude_failed_samples()
        value, details = self._aggregate(tally.items)
        if tally.failures:
            details["failures"] = dict(tally.failures)
        if tally.unscored:
            details["num_unscored"] = tally.unscored
        if job.repeats > 1:
            value = self._repeats(tally.items, job.repeats, details)
        if tally.subsets:
            details["subsets"] = self._subsets(tally)
        if (latency := tally.latency.summary()) is not None:
            details["latency"] = latency
        uncertainty, stats = await self._uncertainty(tally.items, value, details, pool=job.repeats > 1)
        return Score(model, self.dataset, self.metric.name, value, len(tally.samples), len(tally.failed_samples), details,
                     uncertainty.ci95, uncertainty.stderr, tally.usage.to_json(), judge_usage.to_json() if judge_usage.replies else None, stats)

    def _repeats(self, items: list[SampleScore], repeats: int, details: dict[str, Any]) -> Optional[float]:
        """The score over repeats: the mean of each repeat's score, with the per-repeat scores and their spread."""
        per_repeat = [self._aggregate([x for x in items if x.get("repeat", 0) == r])[0] for r in range(repeats)]
        values = [v for v in per_repeat if v is not None]
        details["repeats"] = per_repeat
        details["std"] = float(np.std(values)) if values else None  # population std over repeats, as Twinkle reports it
        return float(np.mean(values)) if values else None

    def _subsets(self, tally: "_Tally") -> dict[str, dict[str, Any]]:
        """Each subset's own score (repeats pooled), samples and failed samples."""
        out = {}
        for name in sorted(tally.subsets):
            items = [x for x in tally.items if x.get("subset") == name]
            samples, failed = tally.subsets[name]
            out[name] = {"score": self._aggregate(items)[0] if items else None, "num_samples": len(samples), "num_failed": len(failed)}
        return out

    async def _consume(self, job: InferenceJob, reader: int, tally: "_Tally") -> None:
        # Each batch is scored as soon as it arrives, while inference (and earlier batches) go on. A
        # slow metric (a judge) holds back this reader, which holds back inference: memory stays flat.
        pending: list[asyncio.Task] = []
        slots = asyncio.Semaphore(BATCHES_SCORING)
        try:
            async for batch in job.stream.batches(reader, linger=BATCH_LINGER):
                tally.total += len(batch)
                for record in batch:
                    tally.usage.add(record.usage, answered=record.reply is not None and not record.extra.get("cached"))
                    tally.latency.add(record)
                    if record.failed:
                        tally.fail(record, record.error or "")
                ok = [r for r in batch if not r.failed]
                if ok:
                    await slots.acquire()
                    task = asyncio.ensure_future(self._score_batch(ok, tally))
                    task.add_done_callback(lambda _: slots.release())
                    pending = [t for t in pending if not t.done() or t.result()] + [task]
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

    async def _uncertainty(self, items: list[SampleScore], value: Optional[float], details: dict[str, Any], pool: bool = False) -> tuple[Uncertainty, Any]:
        """The interval and per-sample statistics, off the event loop: resampling 100k samples takes a second or two.

        With repeats, a sample's repeats are pooled into one row and resampled together: counting
        them as independent samples would make the interval too narrow."""
        loop = asyncio.get_running_loop()

        def compute() -> tuple[Uncertainty, Any]:
            stats = self.metric.sample_stats(items)
            if not pool:
                return self.metric.uncertainty(items, value), stats
            stats = stats.pooled() if stats is not None else None
            if stats is None or value is None or self.metric.context.resamples <= 0:
                return Uncertainty(), stats
            found = bootstrap(stats, value, self.metric.context.resamples, self.metric.context.seed)
            return Uncertainty(found.ci95, found.stderr, "bootstrap over samples, repeats pooled"), stats

        try:
            uncertainty, stats = await loop.run_in_executor(None, compute)
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

    def __init__(self, writer: Optional[JsonlWriter], display_fields: frozenset[str] = frozenset()):
        self.writer = writer
        self.display_fields = display_fields
        self.items: list[SampleScore] = []
        self.failures: Counter[str] = Counter()
        self.unscored = 0   # predictions the metric left out, each with its reason
        self.total = 0
        self.samples: set[str] = set()
        self.failed_samples: set[str] = set()   # a sample with any failed repeat
        self.subsets: dict[str, tuple[set[str], set[str]]] = {}
        self.usage = Usage()   # the model's tokens over every record of the pass (failed ones too: their tokens were spent)
        self.latency = LatencyTally()

    def _count(self, record: Record, failed: bool) -> None:
        self.samples.add(record.id)
        if failed:
            self.failed_samples.add(record.id)
        if record.subset is not None:
            samples, failed_ids = self.subsets.setdefault(record.subset, (set(), set()))
            samples.add(record.id)
            if failed:
                failed_ids.add(record.id)

    def _write(self, line: dict[str, Any]) -> None:
        if self.writer is not None:
            try:
                self.writer.write(line)
            except WriteFailed:
                self.writer = None

    def _where(self, record: Record) -> dict[str, Any]:
        return {"id": record.id, **({"repeat": record.repeat} if record.repeat else {}), **({"subset": record.subset} if record.subset is not None else {})}

    def fail(self, record: Record, reason: str) -> None:
        self.failures[failure_kind(reason)] += 1
        self._count(record, failed=True)
        self._write({**self._where(record), "score": None, "error": reason})

    def add(self, record: Record, item: SampleScore) -> None:
        line = {**self._where(record), **item}  # the id also pairs samples across models
        # A prediction the judge could not score is a sample without a score: failed (its reasons
        # are in details.judge_failures); the item stays, so the metric still counts it.
        judge_failed = bool(item.get("judge_failed"))
        if judge_failed:
            self.failures[JUDGE_FAILED] += 1
        # A sample the metric left out (no reference, no gold option) has no score either: failed,
        # counted under its reason, so a run that scored less than it selected never exits 0.
        unscored = item.get("score") is None and bool(item.get("reason")) and not judge_failed
        if unscored:
            self.failures[item["reason"]] += 1
            self.unscored += 1
        self._count(record, failed=judge_failed or unscored)
        self._write(line)
        self.items.append({k: v for k, v in line.items() if k not in self.display_fields} if self.display_fields else line)

    def exclude_failed_samples(self) -> None:
        """A sample that failed in any repeat is one failed sample: its other repeats' scores leave the
        score too, so num_failed and the score cover complementary sets of samples."""
        for i, item in enumerate(self.items):
            if item.get("score") is not None and item["id"] in self.failed_samples:
                self.items[i] = {**item, "score": None, "excluded": "another repeat of this sample failed"}

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
