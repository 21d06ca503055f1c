"""Build the Engines of a plan, run them all concurrently over shared endpoints, report."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from lalmeval.config import Config, redacted
from lalmeval.data.filters import select
from lalmeval.data.loader import iter_samples
from lalmeval.engine import Engine
from lalmeval.inference.client import Endpoint
from lalmeval.inference.job import AudioCache, InferenceJob
from lalmeval.inference.launch import Launcher
from lalmeval.inference.protocols import PROTOCOLS
from lalmeval.metrics import METRICS
from lalmeval.plan import Plan
from lalmeval.postprocess import POSTPROCESSORS
from lalmeval.preprocess import PREPROCESSORS
from lalmeval.records import Sample, Score
from lalmeval.report import aggregates, final_scores, score_table
from lalmeval.runspecs import Dataset
from lalmeval.store import RunStore


@dataclass
class RunResult:
    scores: list[Score]
    aggregates: list[dict]
    final_path: Path
    requests_sent: int


def load_samples(dataset: Dataset, config: Config) -> list[Sample]:
    """Load and filter one dataset (blocking: runs in a worker thread)."""
    return select(iter_samples(dataset, config.streaming), dataset, config.filters, config.seed)


def _jobs(plan: Plan, samples: dict[str, list[Sample]], endpoints: dict[str, Endpoint], store: RunStore) -> dict[tuple[str, str], InferenceJob]:
    """One inference job per (dataset, model): the pass every metric of that dataset reads."""
    config = plan.config
    jobs = {}
    for dataset in plan.datasets:
        preprocessor = PREPROCESSORS.get(dataset.spec.preprocessor)(dataset, plan.system_texts, plan.add_on_texts)
        postprocessor = POSTPROCESSORS.get(dataset.spec.postprocessor)()
        audio = AudioCache(capacity=max(64, 2 * sum(m.batch_size for m in config.models)))
        for model in config.models:
            jobs[(dataset.name, model.name)] = InferenceJob(
                dataset.name, dataset.iso_language, samples[dataset.name], endpoints[model.name],
                PROTOCOLS.get(model.inference_type), preprocessor, postprocessor,
                plan.params(model, dataset), audio, store,
            )
    return jobs


async def _progress(jobs: dict[tuple[str, str], InferenceJob], interval: float) -> None:
    total = sum(len(j.samples) for j in jobs.values())
    started = time.monotonic()
    while True:
        await asyncio.sleep(interval)
        done = sum(len(j.stream.records) for j in jobs.values())
        failed = sum(1 for j in jobs.values() for r in j.stream.records if r.failed)
        print(f"[{time.monotonic() - started:6.0f}s] {done}/{total} samples, {failed} failed", file=sys.stderr, flush=True)


async def execute(plan: Plan, store: RunStore, progress_every: float = 15.0) -> tuple[list[Score], int]:
    """Load data, launch endpoints, run every inference job and Engine concurrently."""
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) + 2)))
    config = plan.config
    datasets = plan.datasets
    loaded = await asyncio.gather(*(loop.run_in_executor(None, load_samples, d, config) for d in datasets))
    samples = {d.name: s for d, s in zip(datasets, loaded)}
    endpoints = {m.name: Endpoint(m) for m in config.models}
    async with Launcher(config.models, plan.base, store.root):
        for endpoint in endpoints.values():
            await endpoint.open()
        try:
            jobs = _jobs(plan, samples, endpoints, store)
            engines = []
            for dataset, metric in plan.pairs:
                postprocessor = jobs[(dataset.name, config.models[0].name)].postprocessor
                engine_jobs = {m.name: jobs[(dataset.name, m.name)] for m in config.models}
                engines.append(Engine(dataset.name, METRICS.get(metric)(dataset, postprocessor), engine_jobs, store))
            ticker = asyncio.create_task(_progress(jobs, progress_every))
            try:
                results = await asyncio.gather(*(e.run() for e in engines), *(j.run() for j in jobs.values()))
            finally:
                ticker.cancel()
        finally:
            for endpoint in endpoints.values():
                await endpoint.close()
    sent = sum(e.requests_sent for e in endpoints.values())
    return [score for engine_scores in results[: len(engines)] for score in engine_scores], sent


def run(plan: Plan, output_dir: Path, run_id: str, quiet: bool = False) -> RunResult:
    """Run a plan end to end and write DIR/<run_id>/; returns the scores."""
    store = RunStore(output_dir / run_id)
    store.write_config(redacted(plan.config))
    for name, reason in plan.skipped.items():
        print(f"skipping dataset '{name}': filtered out ({reason})", file=sys.stderr)
    scores, sent = _event_loop_run(execute(plan, store))
    rows = aggregates(plan.config.aggregate, scores, plan.catalog)
    path = store.write_final(final_scores(run_id, scores, rows))
    if not quiet:
        print(score_table(scores, rows))
        print(f"Results: {path}")
    return RunResult(scores, rows, path, sent)


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

