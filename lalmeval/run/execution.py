"""One run while it executes: sources, replica groups, inference jobs, Engines, launching and signals."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Optional

from lalmeval.background import abandonable
from lalmeval.config.options import RunOptions
from lalmeval.config.secrets import Redactor
from lalmeval.data.confine import allowed_dirs, folders_to_allow
from lalmeval.data.source import Source, open_source
from lalmeval.errors import Interrupted, UserError
from lalmeval.inference.client import Endpoint
from lalmeval.inference.feed import AudioCache, SampleFeed, width
from lalmeval.inference.job import InferenceJob
from lalmeval.inference.launch import Launcher, launch_list, log_path
from lalmeval.inference.protocols import PROTOCOLS
from lalmeval.judging.judge import Judge
from lalmeval.judging.transcriber import Transcriber, open_transcriber, transcribes
from lalmeval.metrics import METRICS, MetricContext
from lalmeval.postprocess import POSTPROCESSORS
from lalmeval.preprocess import PREPROCESSORS
from lalmeval.results.cache import InferenceCache, cache_file
from lalmeval.results.records import Score
from lalmeval.results.store import RunStore, watch_writes
from lalmeval.run.budget import BudgetWatch
from lalmeval.run.engine import SCORING_FAILED, Engine
from lalmeval.run.failure_rate import FailureWatch
from lalmeval.run.plan import Plan
from lalmeval.run.progress import PassView, Progress

Jobs = dict[tuple[str, str], InferenceJob]   # (dataset, model group) → its pass
SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Execution.phase: start-up phases say what is being done ("opening the data"), then inference, then what follows it.
RUNNING, FINISHING = "running", "finishing"


THREADS = min(8, (os.cpu_count() or 2) + 2)   # the run loop's default executor; AudioCache prepares as many clips at once


class Execution:
    """The state of one run: endpoints per replica group, jobs, engines, the stop signal."""

    def __init__(self, plan: Plan, store: RunStore, options: RunOptions, redactor: Redactor):
        self.plan, self.store, self.options, self.redact = plan, store, options, redactor
        self.stop = asyncio.Event()
        self.endpoints = {g.name: [Endpoint(r.info, redactor, self.stop) for r in g.replicas] for g in plan.groups}
        self.interrupts = 0
        self.phase = "starting"
        self.ended_early: Optional[Interrupted] = None   # Ctrl-C outside inference: the run ends without scores
        self._main: Optional[asyncio.Task] = None
        self._job_tasks: list[asyncio.Task] = []
        self.launcher: Optional[Launcher] = None
        self.write_error: Optional[str] = None
        self.data_errors: dict[str, str] = {}   # dataset → why it could not be opened
        self.sources: dict[str, Source] = {}    # the datasets opened, by name
        self.judge: Optional[Judge] = None
        self.watch = FailureWatch(plan.config.max_failure_rate, self._too_many_failures)
        self.budget = _budget(plan, self._over_budget)
        self.transcriber: Optional[Transcriber] = None
        self.transcriber_launch = None   # the transcriber's server, when the config launches one
        if plan.config.transcriber is not None and not options.skip_eval and any(transcribes(m) for _, m in plan.pairs):
            self.transcriber, self.transcriber_launch = open_transcriber(plan.config.transcriber, store.root, redactor, self.stop)
        if plan.uses_judge and plan.config.judge_properties is not None:
            props = plan.config.judge_properties
            # Without the cross-run cache a run still reuses its own judgments (resume, --reeval): only entries it wrote count.
            own = None if options.use_cache else store.root.name
            cache = InferenceCache(self.cache_dir, f"judge_{props.judge_model}", store.root.name, only_run=own) if options.use_cache or options.run_judgments else None
            self.judge = Judge(props, plan.judge_templates, cache, redactor, cache_sampled=options.cache_sampled, stop=self.stop)
            if self.budget is not None:
                self.judge.on_usage = self.budget.observe_judge

    @property
    def cache_dir(self) -> Path:
        config = self.plan.config
        return Path(config.cache_dir) if config.cache_dir else Path(self.store.root.parent) / ".cache"

    def files(self) -> list[tuple[Path, str]]:
        """Every file this run will read or write in its run directory and the cache folder, with what it is."""
        plan, store, options = self.plan, self.store, self.options
        found = store.files() + [(store.records_path(d.name, g.name), "records file") for d in plan.datasets for g in plan.groups]
        if not options.skip_eval:
            found += [(store.scores_path(d.name, metric, g.name), "scores file") for d, metric in plan.pairs for g in plan.groups]
        if options.use_cache and not options.reeval:
            found += [(cache_file(self.cache_dir, g.name), "cache file") for g in plan.groups]
        if self.judge is not None and self.judge.cache is not None:
            found.append((self.judge.cache.path, "judge cache file"))
        return found + [(log_path(store.root, info), "launch log") for info in launch_list(plan.groups)]

    def all_endpoints(self) -> list[Endpoint]:
        return [e for group in self.endpoints.values() for e in group]

    async def open_sources(self) -> dict[str, Source]:
        """Open and select every dataset at once; one that fails is reported and the others go on."""
        config = self.plan.config
        datasets = self.plan.datasets
        allowed = allowed_dirs(config.allowed_data_dirs, self.plan.base)
        opened = await asyncio.gather(*(abandonable(open_source, d, config.filters, config.seed, config.streaming, allowed)
                                        for d in datasets), return_exceptions=True)
        sources = {}
        for dataset, result in zip(datasets, opened):
            if isinstance(result, UserError):
                self.data_errors[dataset.name] = str(result)
            elif isinstance(result, BaseException):
                self.data_errors[dataset.name] = f"internal error: {type(result).__name__}: {result}"
            else:
                sources[dataset.name] = result
        return sources

    def outside(self) -> list[str]:
        """The folders to allow so that every file a row named outside its data's folder is read."""
        return folders_to_allow(f for source in self.sources.values() if source.folders for f in source.folders.outside)

    def jobs(self, sources: dict[str, Source]) -> Jobs:
        """One inference job per (dataset, model group): the pass every metric of that dataset reads."""
        plan = self.plan
        caches = {g.name: InferenceCache(self.cache_dir, g.name, self.store.root.name) for g in plan.groups}
        # What every pass shares: each endpoint's window of prepared samples, each dataset's one reader,
        # and the clips one model prepared for the others (nothing to share with one model).
        windows = {e: asyncio.Semaphore(width(e.info.batch_size)) for e in self.all_endpoints()}
        shared = 2 * sum(width(e.info.batch_size) for e in self.all_endpoints()) if len(plan.groups) > 1 else 0
        audio = AudioCache(capacity=shared, max_seconds=plan.config.max_audio_seconds, workers=THREADS)
        jobs: Jobs = {}
        for planned in plan.datasets:
            if planned.name not in sources:
                continue
            dataset = sources[planned.name].dataset  # with its format's column mapping filled in
            postprocessor = POSTPROCESSORS.get(dataset.spec.postprocessor)()
            feed = SampleFeed(sources[planned.name].samples)
            for group in plan.groups:
                entry = next(m for m in plan.config.models if m.name == group.name)
                preprocessor = PREPROCESSORS.get(dataset.spec.preprocessor)(dataset, plan.prompt_settings(entry, dataset))
                jobs[(dataset.name, group.name)] = InferenceJob(
                    dataset.name, dataset.iso_language, sources[dataset.name], group.name, self.endpoints[group.name],
                    PROTOCOLS.get(group.info.inference_type), preprocessor, postprocessor, plan.params(entry, dataset),
                    audio, self.store, self.options, caches[group.name], self.stop, group.identity, plan.repeats(dataset),
                    dataset.spec.long_audio or group.info.long_audio, self.redact, feed, windows,
                )
        return jobs

    def engines(self, jobs: Jobs) -> list[Engine]:
        engines = []
        for dataset, metric in self.plan.pairs:
            engine_jobs = {g.name: jobs[(dataset.name, g.name)] for g in self.plan.groups if (dataset.name, g.name) in jobs}
            if not engine_jobs:
                continue  # the dataset could not be opened: reported in data_errors
            first = next(iter(engine_jobs.values()))
            context = MetricContext(judge=self.judge, transcriber=self.transcriber, resamples=self.plan.config.bootstrap_resamples,
                                    seed=self.plan.config.seed, reading=self.plan.config.reading)
            scorer = METRICS.get(metric)(first.preprocessor.dataset, first.postprocessor, context)
            engines.append(Engine(dataset.name, scorer, engine_jobs, self.store))
        return engines

    def on_signal(self) -> None:
        """First Ctrl-C (or SIGTERM): during inference, stop starting requests and give those in flight a
        grace period; before it, end the run there; after it, stop launched servers now and end without
        scores. Second: leave now."""
        self.interrupts += 1
        if self.interrupts > 1:
            self.exit_now()
        if self.phase == RUNNING:
            print(f"\ninterrupted: no new requests; waiting up to {self.options.grace:g}s for those in flight (Ctrl-C again to quit now)", file=sys.stderr, flush=True)
            self.halt()
        elif self.phase == FINISHING:  # every sample is settled: only launched servers may still take time to stop
            if self.launcher is not None:
                self.launcher.kill_now()
            self.ended_early = Interrupted("before final_scores.json was written: the records are on disk")
        else:
            if self.launcher is not None and self.launcher.processes:
                print("\ninterrupted: stopping the launched servers (Ctrl-C again to quit now)", file=sys.stderr, flush=True)
            self.ended_early = Interrupted(f"while {self.phase}: nothing was requested", resumable=False)
            assert self._main is not None
            self._main.cancel()

    def exit_now(self, *_: object) -> None:
        """The second Ctrl-C: stop launched servers and end the process, whatever it was doing."""
        print("\ninterrupted again: stopping launched servers and exiting now (finished records are on disk)", file=sys.stderr, flush=True)
        if self.launcher is not None:
            self.launcher.kill_now()
        os._exit(130)

    def halt(self) -> None:
        """Stop starting requests, judge requests included; cancel what is still in flight after the grace period."""
        if self.stop.is_set():
            return
        self.stop.set()
        asyncio.get_running_loop().call_later(self.options.grace, self._abandon)

    def _too_many_failures(self) -> None:
        print(f"\n{self.watch.stopped}: no new requests; waiting up to {self.options.grace:g}s for those in flight", file=sys.stderr, flush=True)
        self.halt()

    def _over_budget(self) -> None:
        assert self.budget is not None
        print(f"\n{self.budget.stopped}: no new requests; waiting up to {self.options.grace:g}s for those in flight", file=sys.stderr, flush=True)
        self.halt()

    def _abandon(self) -> None:
        for task in self._job_tasks:
            task.cancel()
        if self.judge is not None:
            self.judge.abandon()

    def on_write_error(self, reason: str) -> None:
        """The disk refused a write: stop cleanly, keeping what is written, so the run can be resumed."""
        if self.write_error is None:
            self.write_error = reason
            print(f"\n{reason}: stopping the run (what is written is kept)", file=sys.stderr, flush=True)
        self.halt()

    def _launch_list(self, jobs: Jobs):
        """The servers to start: those of groups that still owe a request (none when every answer is stored)."""
        needed = {name for (_, name), job in jobs.items() if job.needs_requests}
        return launch_list([g for g in self.plan.groups if g.name in needed])

    def _launch_on_demand(self, jobs: Jobs) -> None:
        """A group not launched up front starts when one of its requests turns out to be owed after all
        (a stored answer whose request changed since: edited data, a new prompt)."""
        assert self.launcher is not None
        started = {m.launch for m in self.launcher.models}
        for (_, name), job in jobs.items():
            group = next(g for g in self.plan.groups if g.name == name)
            late = [m for m in launch_list([group]) if m.launch not in started]
            if late:
                job.before_request = functools.partial(self.launcher.on_demand, late)

    async def execute(self, progress_every: float) -> tuple[list[Score], Jobs]:
        """Open the data, launch what is needed, run every job and Engine concurrently.

        Ctrl-C is handled from the first step; when it ends the run outside inference, `ended_early`
        says so and nothing is returned."""
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=THREADS))
        self._main = asyncio.current_task()
        previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
        for sig in SIGNALS:
            loop.add_signal_handler(sig, self.on_signal)
        try:
            return await self._execute(progress_every)
        except asyncio.CancelledError:
            if self.ended_early is None:
                raise
            if hasattr(self._main, "uncancel"):  # Python 3.11+: the cancellation is handled here
                self._main.uncancel()
            return [], {}
        finally:
            for sig, handler in previous.items():
                loop.remove_signal_handler(sig)
                # Once interrupted, the next Ctrl-C exits at once while the loop shuts down too (the caller
                # puts the handlers back after it); otherwise they do what they did before.
                signal.signal(sig, self.exit_now if self.interrupts else handler if handler is not None else signal.SIG_DFL)

    async def _execute(self, progress_every: float) -> tuple[list[Score], Jobs]:
        self.phase = "opening the data"
        sources = self.sources = await self.open_sources()
        if not sources and self.data_errors:  # nothing to evaluate: every dataset's problem is the story
            raise UserError(unavailable(self.data_errors))
        jobs = self.jobs(sources)
        engines = [] if self.options.skip_eval else self.engines(jobs)
        self.phase = "reading the stored records and the cache"
        await asyncio.gather(*(job.prepare() for job in jobs.values()))
        if self.judge and self.judge.cache:
            await abandonable(self.judge.cache.load)
        # A rescore (--reeval) finds most transcripts kept: its transcriber starts only when one is missing.
        upfront = self.transcriber_launch is not None and not self.options.reeval
        self.launcher = Launcher(self._launch_list(jobs) + ([self.transcriber_launch] if upfront else []), self.plan.base, self.store.root, self.redact)
        if self.transcriber is not None and self.transcriber_launch is not None and not upfront:
            self.transcriber.before_request = functools.partial(self.launcher.on_demand, [self.transcriber_launch],
                                                                "a spoken reply has no kept transcript, so it is transcribed")
        self.phase = "starting the launched servers" if self.launcher.models else "connecting to the endpoints"
        async with self.launcher:
            self._launch_on_demand(jobs)
            clients = [*self.all_endpoints(), *([self.judge.endpoint] if self.judge else []),
                       *([self.transcriber.endpoint] if self.transcriber else [])]
            try:
                for endpoint in clients:
                    await endpoint.open()
                scores = await self._run_all(jobs, engines, progress_every)
            finally:
                self.phase = FINISHING
                for endpoint in clients:
                    await endpoint.close()
                self._close_caches(jobs)
        return scores + self._data_error_scores(), jobs

    async def _run_all(self, jobs: Jobs, engines: list[Engine], progress_every: float) -> list[Score]:
        loop = asyncio.get_running_loop()
        for (_, model), job in jobs.items():
            job.stream.listeners.append(self.watch.observe)
            if self.budget is not None:
                job.stream.listeners.append(self.budget.listener(model))
        self._job_tasks = [asyncio.ensure_future(j.run()) for j in jobs.values()]
        self.phase = RUNNING
        watch_writes(lambda reason: loop.call_soon_threadsafe(self.on_write_error, reason))
        progress = Progress([PassView(f"{d} × {m}", j) for (d, m), j in jobs.items()], self.endpoints, progress_every)
        ticker = asyncio.ensure_future(progress.run())
        try:
            scores = await asyncio.gather(*(_guarded(e) for e in engines))
            await asyncio.gather(*self._job_tasks, return_exceptions=True)
        finally:
            self.phase = FINISHING
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
            progress.finish()
            watch_writes(None)
        return [s for engine_scores in scores for s in engine_scores]

    def _close_caches(self, jobs: Jobs) -> None:
        caches = [j.cache for j in jobs.values() if j.cache] + ([self.judge.cache] if self.judge and self.judge.cache else [])
        for cache in {id(c): c for c in caches}.values():
            cache.close()

    def _data_error_scores(self) -> list[Score]:
        """A dataset that could not be opened still has its rows in the score table, with the reason."""
        if self.options.skip_eval:
            return []
        return [Score(g.name, dataset.name, metric, None, 0, 0, {"error": f"data: {self.data_errors[dataset.name]}"})
                for dataset, metric in self.plan.pairs if dataset.name in self.data_errors for g in self.plan.groups]


def _budget(plan: Plan, stop: Callable[[], None]) -> Optional[BudgetWatch]:
    """The budget watch when the config sets max_cost or max_run_tokens."""
    config = plan.config
    if config.max_cost is None and config.max_run_tokens is None:
        return None
    judge = config.judge_properties.judge_price if config.judge_properties is not None else None
    return BudgetWatch(config.max_cost, config.max_run_tokens, model_prices(plan), judge.model_dump() if judge else None, stop)


def model_prices(plan: Plan) -> dict[str, Optional[dict[str, Any]]]:
    """Each model's price (the first entry of its name: replicas are one model), as a dict."""
    prices: dict[str, Optional[dict[str, Any]]] = {}
    for entry in plan.config.models:
        prices.setdefault(entry.name, entry.price.model_dump() if entry.price is not None else None)
    return prices


async def _guarded(engine: Engine) -> list[Score]:
    """An Engine that fails as a whole still reports one Score per model, with its reason."""
    try:
        return await engine.run()
    except Exception as exc:  # noqa: BLE001 - a bug must not take the other Engines' scores with it
        reason = f"{SCORING_FAILED}: {type(exc).__name__}: {exc}"
        return [Score(model, engine.dataset, engine.metric.name, None, job.stream.count, job.stream.count, {"error": reason})
                for model, job in engine.jobs.items()]


def unavailable(errors: dict[str, str]) -> str:
    """One line naming every dataset that could not be opened and why (the first alone when it is the only one)."""
    if len(errors) == 1:
        return next(iter(errors.values()))
    return f"none of the {len(errors)} datasets can be evaluated: " + "; ".join(f"[{name}] {reason}" for name, reason in errors.items())
