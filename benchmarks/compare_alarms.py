"""How often `lalmeval compare` raises a false alarm, and whether it finds a real regression.

Each repetition makes two real runs (scripted endpoint on 127.0.0.1, real records and scores) of
one noisy model on the same datasets, differing only in the model's sampling seed, and compares
them: any change flagged (p (Holm) < 0.05, either direction) is a false alarm. With --inject, the
candidate is worse on one dataset by that much per-word error probability, and the benchmark
reports how often that dataset, and only it, is flagged.

    python benchmarks/compare_alarms.py [--repetitions 40] [--datasets 8] [--samples 60] [--inject 0.2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lalmeval.reports.compare import Side, compare, verdict  # noqa: E402
from lalmeval.reports.rundir import load_run  # noqa: E402
from tests.support.endpoint import ScriptedEndpoint  # noqa: E402
from tests.support.noisy_model import NoisyModel, noisy_datasets  # noqa: E402
from tests.support.workspace import Workspace, model  # noqa: E402


def flagged(root: Path, names: list[str], samples: int, repetition: int, inject: float) -> list[tuple[str, str]]:
    """One repetition: two runs (seeds 2r and 2r+1), compared; (dataset, 'worse' or 'better') of each change that survives the correction."""
    ws = Workspace(root / f"rep{repetition}")
    references = noisy_datasets(ws, names, samples)
    worse = (names[0], inject) if inject else None
    for run_id, seed in (("base", 2 * repetition), ("cand", 2 * repetition + 1)):
        with ScriptedEndpoint(NoisyModel(references, seed, worse if run_id == "cand" else None)) as ep:
            ws.config([model(ep.url)], [[n, "word_error_rate"] for n in names], bootstrap_resamples=1000)
            ws.run(run_id)
    base, cand = (load_run(ws.root / "runs" / r) for r in ("base", "cand"))
    result = compare(Side(base, "m"), Side(cand, "m"), 1000, 0)
    assert not result.differences, result.differences
    return [(r["dataset"], verdict(r)) for r in result.rows if verdict(r) != "no change"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repetitions", type=int, default=40)
    parser.add_argument("--datasets", type=int, default=8)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--inject", type=float, default=0.0, help="per-word error probability added on the first dataset of the candidate")
    args = parser.parse_args()
    names = [f"set{i}" for i in range(args.datasets)]
    started, alarms, gate_alarms, found = time.perf_counter(), 0, 0, 0
    with tempfile.TemporaryDirectory() as folder:
        for repetition in range(args.repetitions):
            hits = flagged(Path(folder), names, args.samples, repetition, args.inject)
            others = [h for h in hits if not (args.inject and h[0] == names[0])]
            alarms += bool(others)
            gate_alarms += any(said == "worse" for _, said in others)
            found += bool(args.inject) and (names[0], "worse") in hits
            print(f"repetition {repetition + 1}: flagged {', '.join(f'{d} {said}' for d, said in hits) or 'nothing'}", file=sys.stderr)
    print(f"{args.repetitions} repetitions of {args.datasets} datasets × {args.samples} samples, {time.perf_counter() - started:.0f}s")
    print(f"false alarms (a dataset without an injected change flagged, either way): {alarms}/{args.repetitions} = {alarms / args.repetitions:.1%}")
    print(f"false regressions (one flagged worse, what --fail-on-regression 0 gates on): {gate_alarms}/{args.repetitions} = "
          f"{gate_alarms / args.repetitions:.1%}")
    if args.inject:
        print(f"injected regression on {names[0]} found: {found}/{args.repetitions} = {found / args.repetitions:.1%}")


if __name__ == "__main__":
    main()
