"""Build the Engines of a plan, run them all concurrently over shared endpoints, report."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from lalmeval.cache import InferenceCache
from lalmeval.config import Config
from lalmeval.config_change import check_config_change
from lalmeval.data.filters import select
from lalmeval.data.loader import iter_samples
from lalmeval.engine import SCORING_FAILED, Engine, failure_kind
from lalmeval.files import check_writable_dir
from lalmeval.inference.client import Endpoint
from lalmeval.inference.job import AudioCache, InferenceJob
from lalmeval.inference.launch import Launcher
from lalmeval.inference.protocols import PROTOCOLS
from lalmeval.judge import Judge
from lalmeval.metrics import METRICS, MetricContext
from lalmeval.options import RunOptions
from lalmeval.plan import Plan
from lalmeval.postprocess import POSTPROCESSORS
from lalmeval.preprocess import PREPROCESSORS
from lalmeval.records import Sample, Score
from lalmeval.report import aggregates, comparison_table, comparisons, failure_table, final_scores, score_table
from lalmeval.reports import write_reports
from lalmeval.runspecs import Dataset
from lalmeval.secrets import Redactor, config_secrets, redacted_config
from lalmeval.store import RunStore, WriteFailed, watch_writes, write_error

Jobs = dict[tuple[str, str], InferenceJob]


@dataclass
class RunResult:
    scores: list[Score]
    aggregates: list[dict]
    final_path: Optional[Path]
    requests_sent: int
    failures: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    down: dict[str, str] = field(default_factory=dict)
    reused: int = 0        # stored predictions published again (resume, --reeval)
    cache_hits: int = 0    # replies and judgments answered by the cache
    write_error: Optional[str] = None   # the disk refused a write: the run stopped early
    unscored: int = 0      # predictions that a metric or judge could not score
    comparisons: list[dict[str, Any]] = field(default_factory=list)  # model pairs on the same dataset–metric

    @property
    def failed_samples(self) -> int:
        """Samples that ended without a prediction (request, audio, pass or interruption failures)."""
        return sum(f["count"] for f in self.failures)

    @property
    def complete(self) -> bool:
        """Every selected sample has a prediction and every prediction a score: the only case for exit 0."""
        return not (self.failed_samples or self.unscored or self.interrupted or self.write_error)


def load_samples(dataset: Dataset, config: Config) -> list[Sample]:
    """Load and filter one dataset (blocking: runs in a worker thread)."""
    return select(iter_samples(dataset, config.streaming), dataset, config.filters, config.seed)


class _Run:
    """The state of one run while it executes: endpoints, jobs, engines and the stop signal."""

    def __init__(self, plan: Plan, store: RunStore, options: RunOptions, redactor: Redactor):
        self.plan, self.store, self.options = plan, store, options
        self.redact = redactor
        self.endpoints = {m.name: Endpoint(m, redactor) for m in plan.config.models}
        self.stop = asyncio.Event()
        self.interrupts = 0
        self.launcher: Optional[Launcher] = None
        self.write_error: Optional[str] = None
        self.judge: Optional[Judge] = None
        if plan.uses_judge and plan.config.judge_properties is not None:
            props = plan.config.judge_properties
            cache = InferenceCache(self.cache_dir, f"judge_{props.judge_model}") if options.use_cache else None
            self.judge = Judge(props, plan.judge_templates, cache, redactor)

    @property
    def cache_dir(self) -> Path:
        config = self.plan.config
        return Path(config.cache_dir) if config.cache_dir else Path(self.store.root.parent) / ".cache"

    def jobs(self, samples: dict[str, list[Sample]]) -> Jobs:
        """One inference job per (dataset, model): the pass every metric of that dataset reads."""
        config, plan = self.plan.config, self.plan
        caches = {m.name: InferenceCache(self.cache_dir, m.name) for m in config.models}
        jobs: Jobs = {}
        for dataset in plan.datasets:
            preprocessor = PREPROCESSORS.get(dataset.spec.preprocessor)(dataset, plan.system_texts, plan.add_on_texts)
            postprocessor = POSTPROCESSORS.get(dataset.spec.postprocessor)()
            audio = AudioCache(capacity=max(64, 2 * sum(m.batch_size for m in config.models)))
            for model in config.models:
                jobs[(dataset.name, model.name)] = InferenceJob(
                    dataset.name, dataset.iso_language, samples[dataset.name], self.endpoints[model.name],
                    PROTOCOLS.get(model.inference_type), preprocessor, postprocessor,
                    plan.params(model, dataset), audio, self.store, self.options, caches[model.name], self.stop,
                )
        return jobs

    def engines(self, jobs: Jobs) -> list[Engine]:
        models = self.plan.config.models
        engines = []
        for dataset, metric in self.plan.pairs:
            engine_jobs = {m.name: jobs[(dataset.name, m.name)] for m in models}
            postprocessor = engine_jobs[models[0].name].postprocessor
            context = MetricContext(judge=self.judge, resamples=self.plan.config.bootstrap_resamples, seed=self.plan.config.seed)
            scorer = METRICS.get(metric)(dataset, postprocessor, context)
            engines.append(Engine(dataset.name, scorer, engine_jobs, self.store))
        return engines

    def on_signal(self, job_tasks: list[asyncio.Task]) -> None:
        """First Ctrl-C (or SIGTERM): stop starting requests, give in-flight ones a grace period. Second: leave now."""
        self.interrupts += 1
        if self.interrupts > 1:
            print("\ninterrupted again: stopping launched servers and exiting now (finished records are on disk)", file=sys.stderr, flush=True)
            if self.launcher is not None:
                self.launcher.kill_now()
            os._exit(130)
        print(f"\ninterrupted: no new requests; waiting up to {self.options.grace:g}s for those in flight (Ctrl-C again to quit now)", file=sys.stderr, flush=True)
        self.halt(job_tasks)

    def halt(self, job_tasks: list[asyncio.Task]) -> None:
        """Stop starting requests; cancel what is still in flight after the grace period."""
        if self.stop.is_set():
            return
        self.stop.set()
        loop = asyncio.get_running_loop()
        loop.call_later(self.options.grace, lambda: [t.cancel() for t in job_tasks])

    def on_write_error(self, reason: str, job_tasks: list[asyncio.Task]) -> None:
        """The disk refused a write: stop cleanly, keeping what is written, so the run can be resumed."""
        if self.write_error is None:
            self.write_error = reason
            print(f"\n{reason}: stopping the run (what is written is kept)", file=sys.stderr, flush=True)
        self.halt(job_tasks)

    async def progress(self, jobs: Jobs, interval: float) -> None:
        total = sum(len(j.samples) for j in jobs.values())
        started = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            done = sum(len(j.stream.records) for j in jobs.values())
            failed = sum(1 for j in jobs.values() for r in j.stream.records if r.failed)
            states = ", ".join(
                f"{name}: limit {e.limit.limit}/{e.info.batch_size}, {e.retries} retries ({e.retry_wait:.1f}s waited)"
                + (" DOWN" if e.down_reason else "")
                for name, e in self.endpoints.items()
            )
            print(f"[{time.monotonic() - started:6.0f}s] {done}/{total} samples, {failed} failed | {states}", file=sys.stderr, flush=True)

    async def execute(self, progress_every: float) -> tuple[list[Score], Jobs]:
        """Load data, launch endpoints (unless only rescoring), run every job and Engine concurrently."""
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) + 2)))
        config = self.plan.config
        datasets = self.plan.datasets
        loaded = await asyncio.gather(*(loop.run_in_executor(None, load_samples, d, config) for d in datasets))
        jobs = self.jobs({d.name: s for d, s in zip(datasets, loaded)})
        engines = [] if self.options.skip_eval else self.engines(jobs)
        models = [] if self.options.reeval else config.models
        self.launcher = Launcher(models, self.plan.base, self.store.root, self.redact)
        async with self.launcher:
            clients = [*self.endpoints.values(), *([self.judge.endpoint] if self.judge else [])]
            for endpoint in clients:
                await endpoint.open()
            if self.judge and self.judge.cache:
                await loop.run_in_executor(None, self.judge.cache.load)
            job_tasks = [asyncio.ensure_future(j.run()) for j in jobs.values()]
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.on_signal, job_tasks)
            watch_writes(lambda reason: loop.call_soon_threadsafe(self.on_write_error, reason, job_tasks))
            ticker = asyncio.ensure_future(self.progress(jobs, progress_every))
            try:
                scores = await asyncio.gather(*(_guarded(e) for e in engines))
                await asyncio.gather(*job_tasks, return_exceptions=True)
            finally:
                ticker.cancel()
                watch_writes(None)
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)
                for endpoint in clients:
                    await endpoint.close()
                caches = [j.cache for j in jobs.values() if j.cache] + ([self.judge.cache] if self.judge and self.judge.cache else [])
                for cache in {id(c): c for c in caches}.values():
                    cache.close()
        return [s for engine_scores in scores for s in engine_scores], jobs


async def _guarded(engine: Engine) -> list[Score]:
    """An Engine that fails as a whole still reports one Score per model, with its reason."""
    try:
        return await engine.run()
    except Exception as exc:  # noqa: BLE001 - a bug must not take the other Engines' scores with it
        reason = f"{SCORING_FAILED}: {type(exc).__name__}: {exc}"
        return [Score(model, engine.dataset, engine.metric.name, None, len(job.samples), len(job.samples), {"error": reason})
                for model, job in engine.jobs.items()]


def _unscored(scores: list[Score]) -> int:
    """Predictions a metric could not score: scoring failures and judge failures."""
    total = 0
    for score in scores:
        total += (score.details.get("failures") or {}).get(SCORING_FAILED, 0)
        total += score.details.get("num_judge_failed") or 0
        if "error" in score.details and score.score is None:
            total += max(1, score.num_samples - score.num_failed)
    return total


def failures(jobs: Jobs) -> list[dict[str, Any]]:
    """Failed samples by (model, dataset, kind), with one example reason each."""
    counts: Counter[tuple[str, str, str]] = Counter()
    examples: dict[tuple[str, str, str], str] = {}
    for (dataset, model), job in jobs.items():
        for record in job.stream.records:
            if record.failed:
                key = (model, dataset, failure_kind(record.error or ""))
                counts[key] += 1
                examples.setdefault(key, record.error or "")
    return [{"model": m, "dataset": d, "kind": k, "count": n, "example": examples[(m, d, k)]} for (m, d, k), n in sorted(counts.items())]


def run(plan: Plan, output_dir: Path, run_id: str, quiet: bool = False, options: RunOptions = RunOptions(), progress_every: float = 15.0) -> RunResult:
    """Run a plan end to end and write DIR/<run_id>/."""
    options = replace(options, cache_sampled=plan.config.cache_sampled)
    redactor = Redactor(config_secrets(plan.config))
    # Every folder the run writes to must take a file before the first request is sent.
    check_writable_dir(output_dir, "output directory")
    store = RunStore(output_dir / run_id)
    store.lock()
    try:
        state = _Run(plan, store, options, redactor)
        if options.use_cache and not options.reeval:
            check_writable_dir(state.cache_dir, "cache directory (cache_dir)")
        check_writable_dir(store.root, "run directory")
        check_config_change(store.root / "config.yaml", redacted_config(plan.config), options)
        store.write_config(redacted_config(plan.config))
        for name, reason in plan.skipped.items():
            print(f"skipping dataset '{name}': filtered out ({reason})", file=sys.stderr)
        scores, jobs = _event_loop_run(state.execute(progress_every))
        result = _result(state, scores, jobs)
        if not options.skip_eval:
            _write_final(result, plan, store, run_id)
    finally:
        store.unlock()
    if not quiet:
        _print_summary(result, store, options, redactor)
    return result


def _result(state: _Run, scores: list[Score], jobs: Jobs) -> RunResult:
    caches = {id(c): c for c in [*(j.cache for j in jobs.values()), state.judge.cache if state.judge else None] if c}
    write_failure = state.write_error or write_error() or next((j.failure for j in jobs.values() if j.failure and j.failure.startswith("cannot write")), None)
    return RunResult(scores, [], None, sum(e.requests_sent for e in state.endpoints.values()), failures(jobs),
                     state.stop.is_set() and not write_failure, {n: e.down_reason for n, e in state.endpoints.items() if e.down_reason},
                     reused=sum(j.reused for j in jobs.values()), cache_hits=sum(c.hits for c in caches.values()),
                     write_error=write_failure, unscored=_unscored(scores))


def _write_final(result: RunResult, plan: Plan, store: RunStore, run_id: str) -> None:
    result.aggregates = aggregates(plan.config.aggregate, result.scores, plan.catalog)
    result.comparisons = comparisons(result.scores, plan.config.bootstrap_resamples, plan.config.seed)
    data = final_scores(run_id, result.scores, result.aggregates, result.comparisons)
    data.update(failures=result.failures, interrupted=result.interrupted or bool(result.write_error), endpoints_down=result.down)
    try:
        result.final_path = store.write_final(data)
    except WriteFailed as exc:
        result.write_error = result.write_error or str(exc)
        return
    write_reports(store.root)  # report.html, results.csv, results.md from the files just written


def _print_summary(result: RunResult, store: RunStore, options: RunOptions, redact: Redactor) -> None:
    if result.reused or result.cache_hits:
        print(f"Reused {result.reused} stored prediction(s); {result.cache_hits} answer(s) from the cache", file=sys.stderr)
    if options.skip_eval:
        print(f"Inference done (--skip-eval): records in {store.root / 'records'}; score them with --reeval")
    else:
        if result.interrupted or result.write_error:
            print("PARTIAL: the run stopped early; the scores below cover only the samples that finished.")
        print(redact(score_table(result.scores, result.aggregates)))
        if result.comparisons:
            print(redact(comparison_table(result.comparisons)))
    if result.failures:
        print(redact(failure_table(result.failures)))
    for name, reason in result.down.items():
        print(redact(f"endpoint of model '{name}' is down: {reason}"), file=sys.stderr)
    if result.final_path:
        print(f"Results: {result.final_path}")


def _event_loop_run(coro):
    # Audio workers hold the GIL in short bursts; with the default 5 ms switch interval the loop
    # waits behind them after every socket read, which costs ~5% of throughput at 200 ms latency.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    try:
        try:
            import uvloop
        except ImportError:
            return asyncio.run(coro)
        return uvloop.run(coro)
    finally:
        sys.setswitchinterval(previous)


def default_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S")

