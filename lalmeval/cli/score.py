"""`lalmeval score`: an outside prediction file (Kimi-Audio-Evalkit's --eval-file) scored with a dataset's metrics.

It writes a run directory as a run does — config.yaml, records, per-sample scores, final_scores.json,
report.html and the results tables — and needs no endpoint (a judge metric asks the config's judge).
The file's rows are the model's replies: each goes through the dataset's postprocessor and metrics
exactly as a run's replies do. Every selected sample of the dataset ends as one record: its
prediction, or a failure saying the file has none; the file's ids that name no selected sample are
reported and left out. References come from the file when it has them, else from the dataset.
Without --dataset or --hf-dataset the file is its own dataset (text, with its references).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from lalmeval.cli.overrides import (
    COMMAND_LINE,
    Overrides,
    add_declared,
    add_selection,
    apply,
    from_args,
)
from lalmeval.data.predictions import Predictions, read_predictions
from lalmeval.errors import UserError

PLACEHOLDER_URL = "http://127.0.0.1:9/v1"   # the model entry a plan needs; score sends nothing to it
SHOWN = 5   # unmatched ids named in the note


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `lalmeval score`."""
    from lalmeval.trackers import add_argument as add_log

    parser.add_argument("--predictions", required=True, metavar="FILE",
                        help="jsonl, json, csv, tsv or parquet of {id, prediction[, reference]} rows (Kimi's index/answer columns too)")
    parser.add_argument("--dataset", metavar="NAME", help="the dataset the predictions answer (its ids, references and metrics)")
    parser.add_argument("--config", "-c", help="config for runspec_dirs, dataset_paths, filters, prompts and the judge (none needed)")
    parser.add_argument("--model-name", dest="as_model", metavar="NAME", help="name of the model in reports and files (default: the file's name)")
    parser.add_argument("--output-dir", "-o", help="parent of the run directory (default: the config's output_dir, run_logs/)")
    parser.add_argument("--run-id", help="name of the new run directory (default: a timestamp)")
    add_selection(parser, choose=False)
    add_log(parser)
    add_declared(parser, models=False)


def _as_dataset(args: argparse.Namespace, predictions: Predictions) -> None:
    """Without --dataset or --hf-dataset the prediction file is its own dataset: text, its ids and references."""
    if predictions.reference_column is None:
        raise UserError(f"{predictions.path}: no reference column ('reference' or 'answer'): give --dataset (or --hf-dataset) "
                        "to take the references from")
    args.hf_dataset, args.modality = str(predictions.path), "text"
    args.id_column, args.target_column = args.id_column or predictions.id_column, args.target_column or predictions.reference_column
    args.dataset_name = args.dataset_name or predictions.path.stem


def _plan(args: argparse.Namespace, predictions: Predictions, model: str):
    """The plan: the config (or none), one dataset and its metrics, and the model whose answers the file holds."""
    from lalmeval.config.schema import load_config
    from lalmeval.run.plan import build_plan

    if args.dataset and args.hf_dataset:
        raise UserError("give --dataset (a dataset lalmeval knows) or --hf-dataset (one declared here), not both")
    if not args.dataset and not args.hf_dataset:
        if not args.metrics:
            raise UserError("without --dataset the prediction file is its own dataset: give --metric (e.g. --metric word_error_rate)")
        _as_dataset(args, predictions)
    overrides: Overrides = replace(from_args(args), datasets=(args.dataset,) if args.dataset else ())
    stand_in = replace(overrides, model_url=PLACEHOLDER_URL, model=model, model_name=model)
    # A config may hold only what scoring reads (runspec_dirs, filters, the judge): the flags give the rest.
    config = load_config(args.config, stand_in.supplied()) if args.config else None
    if config is not None and model in {m.name for m in config.models}:
        overrides = replace(overrides, models=(model,))   # its prompt rules shape the prompt the judge is shown
    else:
        overrides = stand_in
    path = Path(args.config) if args.config else Path(COMMAND_LINE)
    try:
        plan = build_plan(apply(config, overrides, path), path)
    except UserError as exc:  # the flag here is --dataset, one name (run's --datasets takes a list)
        text = str(exc)
        raise (UserError("--dataset:" + text[len("--datasets:"):]) if text.startswith("--datasets:") else exc) from None
    if len(plan.datasets) != 1:
        names = ", ".join(d.name for d in plan.datasets[:5]) + (", …" if len(plan.datasets) > 5 else "")
        raise UserError(f"--dataset '{args.dataset}' holds {len(plan.datasets)} datasets ({names}): a prediction file answers one; name it")
    if plan.datasets[0].spec.turns_column:
        raise UserError(f"dataset '{plan.datasets[0].name}' is a dialogue (turns_column): a prediction file holds one answer per sample, not each turn's")
    return plan


def score_command(args: argparse.Namespace) -> int:
    """Run `lalmeval score`; exit codes as a run's: 0 every sample scored, 2 bad input, 3 samples without a score."""
    from lalmeval.results.store import check_run_id
    from lalmeval.run.runner import default_run_id
    from lalmeval.trackers import chosen, log_run

    trackers = chosen(args.log)
    predictions = read_predictions(Path(args.predictions))
    model = args.as_model or predictions.path.stem
    plan = _plan(args, predictions, model)
    output_dir = Path(args.output_dir or plan.config.output_dir)
    run_id = check_run_id(args.run_id) if args.run_id else default_run_id()   # its folder is made only once a prediction matches
    outcome = score_predictions(plan, predictions, model, output_dir, run_id)
    if trackers:
        log_run(output_dir / run_id, trackers)
    try:
        return _conclude(outcome, plan, predictions)
    finally:
        report = output_dir / run_id / "report.html"
        if report.is_file():
            print(f"Report: {report}", flush=True)  # the last line, as a run's: the page to open


def _conclude(outcome: "Outcome", plan: Any, predictions: Any) -> int:
    """Say what the outcome asks of the user; the exit code."""
    from lalmeval.errors import EXIT_FAILED_SAMPLES

    if outcome.broken_off:
        print(f"error: dataset '{plan.datasets[0].name}' could not be read to the end: {outcome.broken_off}", file=sys.stderr)
        return 2
    if outcome.no_match:
        raise UserError(outcome.no_match)
    if not outcome.complete:
        # Only a missing prediction is mended by adding it; any other reason (a bad reference, a row the data
        # cannot give) would fail again as it stands.
        fix = (f"add their predictions to {predictions.path}" if outcome.only_missing
               else f"fix what the reasons above name (the data, or the rows of {predictions.path})")
        print(f"{outcome.failed} of {outcome.samples} sample(s) have no score (see above) and are left out of the scores: "
              f"{fix} and score again", file=sys.stderr)
        return EXIT_FAILED_SAMPLES
    return 0


@dataclass
class Outcome:
    """What scoring a prediction file came to."""

    samples: int                    # selected samples of the dataset (each one record)
    failed: int                     # samples without a score under some metric
    unmatched: list[str]            # ids of the file naming no selected sample
    final_path: Path
    no_match: Optional[str] = None  # not one id of the file named a selected sample: the wrong file or dataset
    broken_off: Optional[str] = None
    only_missing: bool = True       # every failure is a sample the file has no prediction for

    @property
    def complete(self) -> bool:
        return not (self.failed or self.no_match or self.broken_off)


def _no_match(predictions: Predictions, dataset: str, ids: list[str]) -> Optional[str]:
    """The line that says a file answers another dataset (None when some of its ids are samples of this one)."""
    if set(predictions.by_id) & set(ids):
        return None
    theirs, ours = list(predictions.by_id)[:3], ids[:3]
    return (f"{predictions.path}: none of its {len(predictions.by_id)} id(s) is a selected sample of dataset '{dataset}' (the file's ids: "
            f"{', '.join(map(repr, theirs))}, …; the dataset's: {', '.join(map(repr, ours)) or 'none'}, …): the wrong file or dataset?")


def score_predictions(plan: Any, predictions: Predictions, model: str, output_dir: Path, run_id: str) -> Outcome:
    """Score the file against the plan's one dataset and write the run directory <output_dir>/<run_id>/."""
    from lalmeval.config.secrets import Redactor, config_secrets, redacted_errors
    from lalmeval.data.source import open_source
    from lalmeval.files import check_writable_dir
    from lalmeval.results.store import RunStore

    config = plan.config
    started = time.time()
    # The file holds the replies: no clip or image is read, so none is refused for lying outside the data's folder.
    source = open_source(plan.datasets[0], config.filters, config.seed, config.streaming, media=False)
    problem = _no_match(predictions, source.dataset.name, source.ids) if source.ids is not None else None
    if problem:
        raise UserError(problem)
    check_writable_dir(output_dir, "output directory")
    root = output_dir / run_id
    if root.is_dir() and any(root.iterdir()):
        raise UserError(f"{root} already exists: lalmeval score writes a new run directory; give another --run-id")
    check_writable_dir(root, "run directory")
    store = RunStore(root)
    store.lock()
    redactor = Redactor(config_secrets(config))
    try:
        store.write_config(_stored_config(plan, predictions, model))
        with redacted_errors(redactor):
            scores, file_pass = asyncio.run(_score(plan, source, predictions, model, store, redactor))
        outcome = _write(plan, store, run_id, scores, file_pass, model, started)
    finally:
        store.unlock()
    return outcome


def _stored_config(plan: Any, predictions: Predictions, model: str) -> dict[str, Any]:
    """config.yaml of a scored file: what decided the scores, and the file in place of the models (none was asked)."""
    from lalmeval.config.secrets import redacted_config

    data = redacted_config(plan.config)
    data.pop("models", None)
    return {"predictions": {"file": str(predictions.path.resolve()), "model": model}, **data}


async def _score(plan: Any, source: Any, predictions: Predictions, model: str, store: Any, redactor: Any) -> tuple[list[Any], Any]:
    """The file's records through the dataset's Engines (and the judge, when a metric asks one)."""
    from lalmeval.config.secrets import scrub
    from lalmeval.metrics import METRICS, MetricContext
    from lalmeval.postprocess import POSTPROCESSORS
    from lalmeval.preprocess import PREPROCESSORS
    from lalmeval.results.store import JsonlWriter
    from lalmeval.run.engine import Engine
    from lalmeval.run.file_pass import FilePass

    config, dataset = plan.config, source.dataset
    # The file's model saw the options as the data has them: no shuffling, whatever the config says.
    settings = replace(plan.prompt_settings(config.models[0], dataset), shuffle=False)
    postprocessor = POSTPROCESSORS.get(dataset.spec.postprocessor)()
    file_pass = FilePass(dataset.name, source, predictions, PREPROCESSORS.get(dataset.spec.preprocessor)(dataset, settings), postprocessor)
    stop = asyncio.Event()
    judge = await _judge(plan, store, redactor, stop)
    context = MetricContext(judge=judge, resamples=config.bootstrap_resamples, seed=config.seed, reading=config.reading)
    engines = [Engine(dataset.name, METRICS.get(metric)(dataset, postprocessor, context), {model: file_pass}, store) for _, metric in plan.pairs]
    writer = JsonlWriter(store.records_path(dataset.name, model), mode="w")
    persist = (lambda r: writer.write(scrub(r.to_json(), redactor, keys=False))) if redactor else (lambda r: writer.write(r.to_json()))
    try:
        results = await asyncio.gather(file_pass.run(persist, stop), *(engine.run() for engine in engines))
    finally:
        writer.close()
        if judge is not None:
            await judge.endpoint.close()
            if judge.cache is not None:
                judge.cache.close()
    return [score for scores in results[1:] for score in scores], file_pass


async def _judge(plan: Any, store: Any, redactor: Any, stop: asyncio.Event) -> Any:
    """The config's judge, opened, when a metric needs one (its cache with `cache: true`, as a run's)."""
    if not plan.uses_judge or plan.config.judge_properties is None:
        return None
    from lalmeval.judging.judge import Judge
    from lalmeval.results.cache import InferenceCache

    config = plan.config
    props = config.judge_properties
    folder = Path(config.cache_dir) if config.cache_dir else store.root.parent / ".cache"
    cache = InferenceCache(folder, f"judge_{props.judge_model}", store.root.name) if config.cache else None
    if cache is not None:
        await asyncio.get_running_loop().run_in_executor(None, cache.load)
    judge = Judge(props, plan.judge_templates, cache, redactor, cache_sampled=config.cache_sampled, stop=stop)
    await judge.endpoint.open()
    return judge


def _write(plan: Any, store: Any, run_id: str, scores: list[Any], file_pass: Any, model: str, started: float) -> Outcome:
    """final_scores.json, the reports and the console summary, as a run writes them."""
    from lalmeval.reports import write_reports
    from lalmeval.reports.scores import (
        aggregates,
        comparisons,
        failure_table,
        final_scores,
        score_table,
    )
    from lalmeval.data.fingerprint import data_hash, file_sha256
    from lalmeval.results.provenance import run_provenance
    from lalmeval.run.runner import failures

    config, dataset = plan.config, file_pass.dataset
    rows = aggregates(plan.aggregates, scores, plan.catalog)
    failed = failures({(dataset, model): file_pass})
    unmatched = file_pass.unmatched()
    broken = f"{type(file_pass.failure).__name__}: {file_pass.failure}" if file_pass.failure else None
    data = final_scores(run_id, scores, rows, comparisons(scores, config.bootstrap_resamples, config.seed))
    data.update(failures=failed, interrupted=False, stopped=None, endpoints_down={}, data_errors={},
                broken_off={dataset: broken} if broken else {},
                predictions={"file": str(file_pass.predictions.path), "rows": len(file_pass.predictions.by_id),
                             "matched": len(file_pass.matched), "unmatched": len(unmatched), "unmatched_ids": unmatched[:100]})
    hashes = {dataset: data_hash(plan.datasets[0]),
              "predictions file": {"path": str(file_pass.predictions.path),
                                   "sha256": file_sha256(file_pass.predictions.path), "files": 1}}
    data["provenance"] = run_provenance(started, time.time(), hashes, _stored_config(plan, file_pass.predictions, model))
    final_path = store.write_final(data)
    write_reports(store.root)
    print(score_table(scores, rows))
    if failed:
        print(failure_table(failed))
    if unmatched:
        shown = ", ".join(map(repr, unmatched[:SHOWN])) + (", …" if len(unmatched) > SHOWN else "")
        print(f"note: {len(unmatched)} prediction(s) in {file_pass.predictions.path} name no selected sample of dataset '{dataset}' "
              f"and were not scored: {shown}", file=sys.stderr)
    print(f"Results: {final_path}")
    samples = max((s.num_samples for s in scores), default=file_pass.stream.count)
    no_score = max((s.num_failed for s in scores), default=0) + sum(1 for s in scores if s.score is None and not s.num_failed)
    no_match = _no_match(file_pass.predictions, dataset, file_pass.first_ids)   # a stream's ids are known only now
    kinds = [f["kind"] for f in failed] + [kind for s in scores for kind in (s.details.get("failures") or {})]
    only_missing = all(kind.startswith("no prediction") for kind in kinds)
    return Outcome(samples, no_score, unmatched, final_path, no_match, broken, only_missing)
