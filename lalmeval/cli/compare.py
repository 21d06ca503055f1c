"""`lalmeval compare BASELINE CANDIDATE [MORE...]`: exit 0 no regression, 1 a regression, 2 refused (not like for like, nothing in common, bad input)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional

import yaml

from lalmeval.errors import EXIT_USER_ERROR, UserError

EXIT_REGRESSION = 1
DEFAULT_RESAMPLES = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `lalmeval compare`."""
    parser.add_argument("baseline", metavar="BASELINE", help="run directory of the reference run (run_logs/<run_id>)")
    parser.add_argument("candidates", nargs="+", metavar="CANDIDATE", help="run directories compared with the baseline, each on its own")
    parser.add_argument("--fail-on-regression", type=float, metavar="PTS",
                        help="exit 1 when a metric got worse by more than PTS points with a Holm-corrected p below 0.05")
    parser.add_argument("--allow-different", action="store_true",
                        help="compare although the runs are not like for like (the differences are printed all the same)")
    parser.add_argument("--pair", action="append", default=[], metavar="BASE_MODEL=CAND_MODEL",
                        help="which model of the baseline to compare with which of the candidate (default: one model each, or the same names)")
    parser.add_argument("--json", metavar="FILE", help="also write the comparison as JSON")
    parser.add_argument("--html", default="compare.html", metavar="FILE", help="HTML page to write (default: compare.html)")
    parser.add_argument("--resamples", type=int, metavar="N", help="bootstrap resamples (default: the baseline's bootstrap_resamples, else 1000)")
    parser.add_argument("--seed", type=int, metavar="N", help="bootstrap seed (default: the baseline's seed, else 0)")


def _setting(run_path: Path, key: str) -> Optional[int]:
    """An integer setting of a run's config.yaml (None when absent or unreadable)."""
    try:
        data = yaml.safe_load((run_path / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def compare_command(args: argparse.Namespace) -> int:
    """Run `lalmeval compare`; returns its exit code."""
    from lalmeval.reports.compare import Side, compare, model_pairs, regressions
    from lalmeval.reports.compare_output import console
    from lalmeval.reports.rundir import load_run

    if args.fail_on_regression is not None and not args.fail_on_regression >= 0:
        raise UserError(f"--fail-on-regression: give the points a metric may worsen by, 0 or more (got {args.fail_on_regression:g})")
    baseline = load_run(Path(args.baseline))
    resamples = args.resamples if args.resamples is not None else (_setting(baseline.path, "bootstrap_resamples") or DEFAULT_RESAMPLES)
    seed = args.seed if args.seed is not None else (_setting(baseline.path, "seed") or 0)
    if resamples <= 0:
        raise UserError(f"--resamples: a paired bootstrap needs at least 1 resample (got {resamples})")
    results = []
    for path in args.candidates:
        candidate = load_run(Path(path))
        for a, b in model_pairs(baseline, candidate, args.pair):
            results.append(compare(Side(baseline, a), Side(candidate, b), resamples, seed, refuse=not args.allow_different))
    refused = any(r.differences for r in results) and not args.allow_different
    for result in results:
        for line in result.differences:  # before any number: why the runs are not like for like
            print(f"not like for like: {result.candidate.label} against {result.baseline.label}: {line}", file=sys.stderr)
    # A pair of runs with no dataset–metric in common tested nothing: a gate must not pass on that.
    empty = [] if refused else [r for r in results if not r.rows]
    found = [] if refused else [row for r in results for row in regressions(r, args.fail_on_regression or 0.0)]
    code = EXIT_USER_ERROR if refused or empty else (EXIT_REGRESSION if found and args.fail_on_regression is not None else 0)
    if not refused:
        for result in results:
            print(console(result, args.fail_on_regression))
    _write(args, results, refused, code)
    if refused:
        print("error: the runs are not like for like (see above): evaluate both with the same config, or give --allow-different "
              "to compare them anyway", file=sys.stderr)
    elif empty:
        for result in empty:
            print(f"error: {result.candidate.label} and {result.baseline.label} scored no dataset–metric in common (see Not compared "
                  "above), so nothing was compared: give a candidate run of the baseline's datasets and metrics", file=sys.stderr)
    elif code == EXIT_REGRESSION:
        names = ", ".join(f"{r['dataset']} · {r['metric']}" for r in found)
        print(f"REGRESSION: {names} got worse by more than {args.fail_on_regression:g} point(s) (p (Holm) < 0.05)", file=sys.stderr)
    return code


def _write(args: argparse.Namespace, results: list, refused: bool, code: int) -> None:
    """--json FILE and the HTML page."""
    from lalmeval.reports.compare_output import as_json, html
    from lalmeval.results.store import write_atomic

    if args.json:
        write_atomic(Path(args.json), json.dumps(as_json(results, args.fail_on_regression, refused, code), indent=2, ensure_ascii=False) + "\n")
        print(f"JSON: {args.json}")
    if args.html:
        write_atomic(Path(args.html), html(results, args.fail_on_regression, refused))
        print(f"Comparison: {args.html}")
