"""Memory and time of writing a run's reports (report.html, results.csv, results.md).

Builds a finished run directory with `--samples` records whose prompt and reply hold `--chars`
characters each, then writes its reports in this process and prints wall-clock seconds and the
peak resident memory above what the process held before. The page embeds at most 4 MB of
per-sample rows; the rest of the texts must stay on disk.

    python benchmarks/report.py [--samples 20000] [--chars 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lalmeval.reports import write_reports  # noqa: E402
from lalmeval.results.store import RunStore  # noqa: E402

WORDS = "the a cat dog sat ran on under mat house big small red green quickly slowly today we they saw".split()


def build_run(root: Path, samples: int, chars: int) -> None:
    """A run directory as a finished run leaves it: records, per-sample scores, final_scores.json."""
    rng = random.Random(0)
    store = RunStore(root)
    records, scores = store.records_path("set", "model"), store.scores_path("set", "accuracy", "model")
    records.parent.mkdir(parents=True)
    scores.parent.mkdir(parents=True)
    failed = 0
    with records.open("w") as out, scores.open("w") as score_out:
        for i in range(samples):
            text = " ".join(rng.choice(WORDS) for _ in range(chars // 5))[:chars]
            error = "HTTP 500: server error" if i % 50 == 0 else None
            failed += error is not None
            out.write(json.dumps({"id": f"s{i}", "prompt": text, "reference": text[:80], "reply": None if error else text,
                                  "prediction": None if error else text[:80], "latency": round(rng.uniform(0.1, 2), 3),
                                  "attempts": 1, "error": error, "repeat": 0, "extra": {}}) + "\n")
            score_out.write(json.dumps({"id": f"s{i}", "score": None if error else float(rng.random() < 0.7)}) + "\n")
    final = {"run_id": root.name, "scores": [{"model": "model", "dataset": "set", "metric": "accuracy", "score": 0.7,
                                              "num_samples": samples, "num_failed": failed, "details": {}}],
             "aggregates": [], "comparisons": [], "failures": [], "interrupted": False, "endpoints_down": {}}
    (root / "final_scores.json").write_text(json.dumps(final))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--chars", type=int, default=10000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        build_run(root, args.samples, args.chars)
        size = sum(f.stat().st_size for f in root.rglob("*.jsonl")) / 1e6
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        start = time.perf_counter()
        write_reports(root)
        took = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        page = (root / "report.html").stat().st_size / 1e6
    print(f"{args.samples} samples, {size:.0f} MB of records: reports in {took:.1f} s, "
          f"peak RSS {peak:.0f} MB ({peak - before:.0f} MB above the {before:.0f} MB before), report.html {page:.1f} MB")


if __name__ == "__main__":
    main()
