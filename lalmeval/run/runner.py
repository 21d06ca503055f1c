"""Run a plan end to end: execute it, write final_scores.json and the reports, print the summary."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from lalmeval.config.change import check_config_change
from lalmeval.config.options import RunOptions
from lalmeval.data.fingerprint import data_hash
from lalmeval.config.secrets import (
    Redactor,
    config_secrets,
    redacted_config,
    redacted_errors,
    short_secret_warnings,
)
from lalmeval.errors import Interrupted, LaunchFailed, UserError, WriteFailed
from lalmeval.files import check_regular, check_writable_dir
from lalmeval.reports.scores import (
    aggregates,
    comparison_table,
    comparisons,
    failure_table,
    final_scores,
    score_table,
)
from lalmeval.results.provenance import run_provenance
from lalmeval.results.records import Score
from lalmeval.results.store import RunStore, write_error
from lalmeval.results.usage import Usage, run_totals
from lalmeval.run.engine import SCORING_FAILED
from lalmeval.run.execution import Execution, Jobs, model_prices
from lalmeval.run.plan import Plan
from lalmeval.run.protocol_used import protocol_used


@dataclass
class RunResult:
    scores: list[Score]
    aggregates: list[dict]
    final_path: Optional[Path]
    requests_sent: int
    failures: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    down: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)   # endpoints that refused every request: the diagnosis of each
    stopped: Optional[str] = None   # why the run stopped itself (max_failure_rate, max_cost, max_run_tokens), if it did
    reused: int = 0        # stored predictions published again (resume, --reeval)
    cache_hits: int = 0    # replies and judgments answered by the cache
    write_error: Optional[str] = None   # the disk refused a write: the run stopped early
    unscored: int = 0      # predictions that a metric or judge could not score
    comparisons: list[dict[str, Any]] = field(default_factory=list)  # model pairs on the same dataset–metric
    data_errors: dict[str, str] = field(default_factory=dict)        # datasets that could not be opened
    broken_off: dict[str, str] = field(default_factory=dict)         # datasets whose read broke off mid-run (streamed)
    usage: dict[str, Any] = field(default_factory=dict)              # final_scores.json "usage": tokens, per model and judge
    cost: Optional[dict[str, Any]] = None                            # ... "cost", when every model that used tokens is priced
    outside: list[str] = field(default_factory=list)   # folders to allow (--allow-data-dir) for the files rows named outside their data

    @property
    def failed_samples(self) -> int:
        """Samples that ended without a prediction (request, audio, pass or interruption failures)."""
        return sum(f["count"] for f in self.failures)

    @property
    def complete(self) -> bool:
        """Every selected sample has a prediction and every prediction a score: the only case for exit 0."""
        return not (self.failed_samples or self.unscored or self.interrupted or self.write_error or self.data_errors or self.broken_off)


def _unscored(scores: list[Score]) -> int:
    """Predictions a metric could not score: scoring and judge failures, samples left out (no
    reference, no gold option), and every prediction of a score that could not be computed."""
    total = 0
    for score in scores:
        total += (score.details.get("failures") or {}).get(SCORING_FAILED, 0)
        total += score.details.get("num_judge_failed") or 0
        total += score.details.get("num_unscored") or 0
        if score.score is None and score.num_samples and ("error" in score.details or score.num_samples > score.num_failed):
            total += max(1, score.num_samples - score.num_failed)
    return total


def failures(jobs: Jobs) -> list[dict[str, Any]]:
    """Failed samples by (model, dataset, kind), with one example reason each."""
    rows = [{"model": model, "dataset": dataset, "kind": kind, "count": count, "example": job.stream.failure_examples[kind]}
            for (dataset, model), job in jobs.items() for kind, count in job.stream.failure_kinds.items()]
    return sorted(rows, key=lambda row: (row["model"], row["dataset"], row["kind"]))


class DataHashes:
    """The content hash (or hub revision) of every dataset of the plan, computed in a thread beside the run:
    reading gigabytes of audio must not hold back the first request."""

    def __init__(self, plan: Plan):
        self.found: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._compute, args=(plan,), name="lalmeval-data-hashes", daemon=True)
        self._thread.start()

    def _compute(self, plan: Plan) -> None:
        for dataset in plan.datasets:
            self.found[dataset.name] = data_hash(dataset)

    def result(self) -> dict[str, Any]:
        self._thread.join()
        return dict(self.found)


def run(plan: Plan, output_dir: Path, run_id: str, quiet: bool = False, options: RunOptions = RunOptions(), progress_every: float = 15.0,
        name_report: bool = True) -> RunResult:
    """Run a plan end to end and write DIR/<run_id>/.

    A write the disk refuses before the first request raises WriteFailed. Ctrl-C raises Interrupted
    saying what is on disk (during inference it first lets the requests in flight finish)."""
    use_cache = plan.config.cache if options.use_cache is None else options.use_cache   # --cache / --no-cache win over the config
    options = replace(options, cache_sampled=plan.config.cache_sampled, use_cache=use_cache, run_judgments=options.use_cache is not False)
    redactor = Redactor(config_secrets(plan.config))
    # Every folder the run writes to must take a file before the first request is sent.
    check_writable_dir(output_dir, "output directory")
    fresh = not (output_dir / run_id).is_dir() or not any((output_dir / run_id).iterdir())   # default_run_id makes it empty
    check_writable_dir(output_dir / run_id, "run directory")
    store = RunStore(output_dir / run_id)
    stopped = Interrupted("while starting: nothing was requested", resumable=False)  # what a Ctrl-C at this point means
    started, hashes = time.time(), DataHashes(plan)
    try:
        store.lock()
        try:
            with redacted_errors(redactor):  # messages name URLs and launch commands
                try:
                    state = Execution(plan, store, options, redactor)
                    _start(state, plan, store, options)
                    scores, jobs = _event_loop_run(state.execute(progress_every))
                except LaunchFailed as exc:
                    _record_failed_launch(store, run_id, redactor(str(exc)))
                    raise
                except UserError:
                    if fresh:  # refused before it began (bad data): no half-empty folder for `report run_logs/*` to trip on
                        store.unlock()
                        _remove_unbegun(store.root)
                    raise
            if state.ended_early is not None:
                raise state.ended_early
            written = "the records"
            stopped = Interrupted(f"before final_scores.json was written: {written} are on disk")
            result = _result(state, scores, jobs)
            if not options.skip_eval:
                _write_final(result, plan, store, run_id, redactor, run_provenance(started, time.time(), hashes.result(), redacted_config(plan.config)),
                             state.judge.usage if state.judge is not None else None)
                if result.final_path:
                    written = "the records and final_scores.json"
                    stopped = Interrupted(f"while writing the reports: {written} are on disk")
                    from lalmeval.reports import (
                        write_reports,  # imported here: a run's start-up does not need it
                    )

                    write_reports(store.root)  # report.html, results.csv, results.md from the files just written
                    written = "the records, final_scores.json and the reports"
        finally:
            store.unlock()
        stopped = Interrupted(f"after the run was written: {written} are on disk")
        if not quiet:
            _print_summary(result, store, options, redactor, name_report)
    except Interrupted:
        raise
    except KeyboardInterrupt:
        raise stopped from None
    return result


def _start(state: Execution, plan: Plan, store: RunStore, options: RunOptions) -> None:
    """Check the cache folder and the stored config, then write this run's config.yaml."""
    if (options.use_cache and not options.reeval) or (state.judge is not None and state.judge.cache is not None):
        check_writable_dir(state.cache_dir, "cache directory (cache_dir)")
    for path, what in state.files():  # a named pipe among them would block the run for ever
        check_regular(path, what)
    check_config_change(store.root / "config.yaml", redacted_config(plan.config), options)
    store.write_config(redacted_config(plan.config))
    for line in short_secret_warnings(plan.config):
        print(line, file=sys.stderr)
    for name, reason in plan.skipped.items():
        print(f"skipping dataset '{name}': {reason}", file=sys.stderr)


_UNBEGUN = {"config.yaml", ".lock"}   # what a run writes before it reads its data


def _remove_unbegun(root: Path) -> None:
    """Remove a run directory this run created and wrote nothing into but its config and lock."""
    try:
        if {p.name for p in root.iterdir()} <= _UNBEGUN:
            for name in _UNBEGUN:
                (root / name).unlink(missing_ok=True)
            root.rmdir()
    except OSError:
        pass  # the refusal is the error to report; a folder left behind is harmless


def _record_failed_launch(store: RunStore, run_id: str, reason: str) -> None:
    """A run whose server never came up still leaves a valid run directory, marked failed with the reason
    (a leaderboard over run_logs/ lists it as failed instead of refusing it); a stored result is left alone."""
    if (store.root / "final_scores.json").exists():
        return
    data = final_scores(run_id, [], [])
    data.update(failures=[], interrupted=False, launch_failed=reason)
    try:
        store.write_final(data)
    except WriteFailed:
        pass  # the launch failure is the error to report


def _result(state: Execution, scores: list[Score], jobs: Jobs) -> RunResult:
    for score in scores:
        job = jobs.get((score.dataset, score.model))
        if job is not None and job.broken_off:  # a stream that broke off: its scores say they cover only the rows read
            score.details["data_broke_off"] = job.broken_off
        if job is not None and job.stream.cached:  # answers this run did not ask the server for, and who did
            score.details["from_cache"] = {"answers": sum(job.stream.cached.values()), "runs": dict(job.stream.cached.most_common())}
        if len(state.endpoints.get(score.model, ())) > 1:  # one score pooled from several servers: name them
            score.details["replicas"] = [e.shown_url for e in state.endpoints[score.model]]
        if job is not None and job.empty:
            score.details["error"] = f"data: {job.empty}"
    for (dataset, _), job in jobs.items():  # a stream whose filters kept nothing is reported like data that could not be opened
        if job.empty:
            state.data_errors.setdefault(dataset, job.empty)
    caches = {id(c): c for c in [*(j.cache for j in jobs.values()), state.judge.cache if state.judge else None] if c}
    write_failure = state.write_error or write_error() or next((j.failure for j in jobs.values() if j.failure and j.failure.startswith("cannot write")), None)
    named = [(f"{name} ({e.shown_url})" if len(group) > 1 else name, e) for name, group in state.endpoints.items() for e in group]
    named += [(state.judge.info.name, state.judge.endpoint)] if state.judge is not None else []   # 'judge:<model>'
    down = {label: e.refused or e.down_reason for label, e in named if e.down_reason}
    refused = {label: state.redact(e.refused) for label, e in named if e.refused}
    return RunResult(scores, [], None, sum(e.requests_sent for e in state.all_endpoints()), failures(jobs),
                     state.stop.is_set() and not write_failure, down, refused, state.watch.stopped or (state.budget.stopped if state.budget else None),
                     reused=sum(j.reused for j in jobs.values()), cache_hits=sum(c.hits for c in caches.values()),
                     write_error=write_failure, unscored=_unscored(scores), data_errors=dict(state.data_errors),
                     broken_off={dataset: job.broken_off for (dataset, _), job in jobs.items() if job.broken_off},
                     outside=state.outside())


def _write_final(result: RunResult, plan: Plan, store: RunStore, run_id: str, redactor: Redactor, provenance: dict[str, Any],
                 judge_usage: Optional[Usage]) -> None:
    for score in result.scores:  # what each score was scored and asked with, as reports print it
        used = protocol_used(plan, score, redactor)
        if used is not None:
            score.details["protocol"] = used
    result.aggregates = aggregates(plan.aggregates, result.scores, plan.catalog, plan.config.bootstrap_resamples, plan.config.seed)
    result.comparisons = comparisons(result.scores, plan.config.bootstrap_resamples, plan.config.seed)
    data = final_scores(run_id, result.scores, result.aggregates, result.comparisons)
    judge = plan.config.judge_properties
    data.update(run_totals(data["scores"], judge_usage, model_prices(plan), judge.judge_price.model_dump() if judge and judge.judge_price else None))
    result.usage, result.cost = data["usage"], data.get("cost")
    data.update(failures=result.failures, interrupted=result.interrupted or bool(result.write_error), stopped=result.stopped, endpoints_down=result.down,
                data_errors=result.data_errors, broken_off=result.broken_off, provenance=provenance)
    try:
        result.final_path = store.write_final(data)
    except WriteFailed as exc:
        result.write_error = result.write_error or str(exc)


def who(label: str) -> str:
    """How a message names an endpoint: "model 'm'" (or "model 'm (url)'" for a replica), or 'judge:<model>'."""
    return label if label.startswith("judge:") else f"model '{label}'"


def _print_summary(result: RunResult, store: RunStore, options: RunOptions, redact: Redactor, name_report: bool = True) -> None:
    """The score, comparison and failure tables, what went wrong, and where the results are; with `name_report`
    the last line names report.html (the CLI names it itself, after what it has to say about the outcome)."""
    if result.reused or result.cache_hits:
        print(f"Reused {result.reused} stored prediction(s); {result.cache_hits} answer(s) from the cache", file=sys.stderr)
    if options.skip_eval:
        print(f"Inference done (--skip-eval): records in {store.root / 'records'}; score them with --reeval")
    else:
        if result.interrupted or result.write_error or result.broken_off:
            print("PARTIAL: the run stopped early; the scores below cover only the samples that finished.")
        print(score_table(result.scores, result.aggregates, redact))
        if result.usage.get("replies"):
            print(usage_line(result.usage, result.cost))
        if result.comparisons:
            print(comparison_table(result.comparisons, redact))
    if result.failures:
        print(failure_table(result.failures, redact))
    for name, reason in result.down.items():
        if name in result.refused:  # a refusal that failed samples is the one line the command ends with
            if result.complete:
                print(redact(f"warning: {who(name)}: {result.refused[name]}; the other replicas answered its samples"), file=sys.stderr)
        else:
            print(redact(f"endpoint of {who(name)} is down: {reason}"), file=sys.stderr)
    for name, reason in result.data_errors.items():
        print(redact(f"error: dataset '{name}' was not evaluated: {reason}"), file=sys.stderr)
    for name, reason in result.broken_off.items():
        print(redact(f"error: dataset '{name}': {reason.rstrip('.')}; the samples after the break failed or were never read"), file=sys.stderr)
    if result.final_path:
        print(f"Results: {result.final_path}")
        if name_report and (store.root / "report.html").is_file():
            print(f"Report: {store.root / 'report.html'}")


def usage_line(usage: dict[str, Any], cost: Optional[dict[str, Any]]) -> str:
    """'Tokens: 1234 prompt, 56 completion (judge 78); cost 0.0012' for the console summary."""
    judge = usage.get("judge")
    text = f"Tokens: {usage['prompt_tokens']} prompt, {usage['completion_tokens']} completion" + (f" (judge included: {judge['total_tokens']})" if judge else "")
    if usage.get("unreported"):
        text += f"; {usage['unreported']} repl(ies) reported no usage"
    return text + (f"; cost {cost['total']:.6g}" if cost else "")


def _event_loop_run(coro):
    """Run `coro` in a fresh event loop; Ctrl-C and SIGTERM do afterwards what they did before."""
    # Audio workers hold the GIL in short bursts; with the default 5 ms switch interval the loop
    # waits behind them after every socket read, which costs ~5% of throughput at 200 ms latency.
    previous = sys.getswitchinterval()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    sys.setswitchinterval(0.0005)
    # Whatever existed before the run (modules, the config, the plan; in a long-lived caller, everything else it holds)
    # is left out of garbage collection until the run ends: a full collection walking it stopped the event loop for
    # tens of milliseconds, and each stop delays the clock reads that time a stream's first token and audio.
    gc.freeze()
    try:
        try:
            import uvloop
        except ImportError:
            return asyncio.run(coro)
        return uvloop.run(coro)
    finally:
        gc.unfreeze()
        sys.setswitchinterval(previous)
        for sig, handler in handlers.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def default_run_id(output_dir: Optional[Path] = None) -> str:
    """A timestamp. With `output_dir`, one no other run holds: its folder is created here (atomically, so two
    runs started in the same second cannot both take it) and a taken one gets -2, -3, ... after it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if output_dir is None:
        return stamp
    for attempt in range(1, 1000):
        run_id = stamp if attempt == 1 else f"{stamp}-{attempt}"
        try:
            (output_dir / run_id).mkdir(parents=True)
            return run_id
        except FileExistsError:
            continue
        except OSError:
            return run_id  # the folder cannot be made: the run says why, naming it
    return f"{stamp}-{os.getpid()}"

