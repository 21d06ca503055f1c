"""lalmeval.evaluate(): run an evaluation from Python (a notebook, a script) and get its scores."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from lalmeval.errors import UserError


@dataclass(frozen=True)
class Evaluation:
    """What a run produced, as its run directory holds it."""

    run_dir: Path                        # <output_dir>/<run_id>/: records, scores, report.html
    scores: list[dict[str, Any]]         # final_scores.json "scores": model, dataset, metric, score, ci95, num_samples, num_failed, ...
    aggregates: list[dict[str, Any]]     # final_scores.json "aggregates"
    comparisons: list[dict[str, Any]]    # final_scores.json "comparisons": paired differences between models
    failures: list[dict[str, Any]]       # failed samples by model, dataset and kind, with an example reason
    complete: bool                       # every sample has a prediction and every prediction a score (the CLI's exit 0)
    usage: dict[str, Any] = field(default_factory=dict)   # final_scores.json "usage": tokens, per model and for the judge
    cost: Optional[dict[str, Any]] = None                 # final_scores.json "cost", when every model that used tokens is priced


def _load(config: Union[str, Path, Mapping[str, Any]], overrides: Any = None):
    """A Plan from a YAML path or a mapping (with the command line's overrides, as `lalmeval run` applies them);
    a mapping's relative paths are taken from the current directory."""
    from lalmeval.cli.overrides import Overrides, apply
    from lalmeval.config.schema import load_config, parse_config
    from lalmeval.run.plan import build_plan

    overrides = overrides or Overrides()
    if isinstance(config, Mapping):
        parsed, path = parse_config(dict(config), "config", overrides.supplied()), Path("config")
    elif isinstance(config, (str, Path)):
        parsed, path = load_config(config, overrides.supplied()), Path(config)
    else:
        raise UserError(f"config must be a path to a YAML file or a dict, got {type(config).__name__}")
    return build_plan(apply(parsed, overrides, path), path)


def _names(value: Union[str, Sequence[str], None], key: str = "names") -> tuple[str, ...]:
    """'a,b' or ['a', 'b'] as names; None is no selection, and a given selection naming nothing ('' , [], ',') is refused."""
    items = [value] if isinstance(value, str) else list(value or [])
    names = tuple(dict.fromkeys(n.strip() for item in items for n in item.split(",") if n.strip()))
    if value is not None and not names:   # it would otherwise mean "all" and run everything
        raise UserError(f"{key}={value!r} names no {key[:-1]}: give at least one name (or None for the config's)")
    return names


class _Sink:
    """A text stream that keeps nothing: where a quiet run's output goes."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def _silenced(quiet: bool) -> Iterator[None]:
    """quiet=True prints nothing: the score table, progress lines, notes and warnings — ours and those
    of the libraries a run uses (dataset progress bars, Python warnings) — go nowhere for the call."""
    if not quiet:
        yield
        return
    with warnings.catch_warnings(), contextlib.redirect_stdout(_Sink()), contextlib.redirect_stderr(_Sink()):  # type: ignore[type-var]
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _own_event_loop() -> Iterator[None]:
    """Let the run start its own event loop even inside a running one (a Jupyter cell), then put everything back.

    The cell blocks its kernel's loop while it runs, so the two never run at once; the run's
    Ctrl-C handling replaces the kernel's for that time only.
    """
    if threading.current_thread() is not threading.main_thread():
        raise UserError("lalmeval.evaluate must be called from the main thread (a run handles Ctrl-C there)")
    outer = asyncio.events._get_running_loop()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    wakeup = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup)
    asyncio.events._set_running_loop(None)
    try:
        yield
    finally:
        asyncio.events._set_running_loop(outer)
        signal.set_wakeup_fd(wakeup)
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)


def evaluate(config: Union[str, Path, Mapping[str, Any]], *, output_dir: Union[str, Path, None] = None,
             run_id: Optional[str] = None, use_cache: Optional[bool] = None, allow_config_change: bool = False,
             quiet: bool = False, limit: Optional[int] = None, models: Union[str, Sequence[str], None] = None,
             datasets: Union[str, Sequence[str], None] = None, metrics: Union[str, Sequence[str], None] = None,
             log: Union[str, Sequence[str], None] = None) -> Evaluation:
    """Run the evaluation a config describes (a YAML path or a dict) and return its scores; bad input raises UserError.

    `limit`, `models`, `datasets`, `metrics` and `log` do what `lalmeval run`'s --limit, --models, --datasets,
    --metrics and --log do."""
    from lalmeval.cli.overrides import Overrides
    from lalmeval.config.options import RunOptions
    from lalmeval.results.store import check_run_id
    from lalmeval.run.runner import default_run_id, run
    from lalmeval.trackers import chosen, log_run

    if limit is not None and not (isinstance(limit, int) and 0 < limit <= 10**9):
        raise UserError(f"limit must be a whole number of samples from 1 to 1000000000, got {limit!r}")
    overrides = Overrides(limit, _names(models, "models"), _names(datasets, "datasets"), _names(metrics, "metrics"))
    with _silenced(quiet):
        trackers = chosen(_names(log))
        plan = _load(config, overrides)
        out = Path(output_dir if output_dir is not None else plan.config.output_dir)
        run_id = check_run_id(run_id) if run_id is not None else default_run_id(out)
        options = RunOptions(use_cache=use_cache, allow_config_change=allow_config_change)
        with _own_event_loop():
            result = run(plan, out, run_id, quiet=quiet, options=options)
        if trackers and result.final_path:
            log_run(out / run_id, trackers)
    return Evaluation(out / run_id, [s.to_json() for s in result.scores], result.aggregates, result.comparisons,
                      result.failures, result.complete, result.usage, result.cost)
