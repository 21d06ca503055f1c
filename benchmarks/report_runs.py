"""How `lalmeval report RUN...` copes with many large runs: 10 runs × 20 000 samples by default.

Writes synthetic run directories (records, per-sample word error rates, final_scores.json,
as a run lays them out), builds the leaderboard page with its side-by-side samples, and prints the
time to build it, its size, and (with --browser) how long headless Chromium takes to open it, with
a screenshot. The page keeps one page of rows in the DOM, so opening it costs parsing its data.

    python benchmarks/report_runs.py [--runs 10] [--samples 20000] [--datasets 4] [--browser] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lalmeval.metrics.wer import edit_counts  # noqa: E402
from lalmeval.reports import write_leaderboard  # noqa: E402
from lalmeval.results.records import Record  # noqa: E402
from lalmeval.results.store import file_name  # noqa: E402

WORDS = "the a cat dog sat ran on under mat house big small red green quickly slowly today we they saw".split()


def wer_line(sample_id: str, reference: str, prediction: str) -> dict:
    """A scores/ line as word_error_rate writes it (the words are already normalized here)."""
    ref, hyp = reference.split(), prediction.split()
    s, d, i = edit_counts(ref, hyp, False)
    return {"id": sample_id, "score": (s + d + i) / len(ref), "errors": s + d + i, "substitutions": s, "deletions": d, "insertions": i,
            "ref_tokens": len(ref)}


def write_run(root: Path, run: int, datasets: list[str], samples: int) -> Path:
    """One run directory: every dataset's records and per-sample WER, and final_scores.json."""
    folder = root / f"run{run:02d}"
    (folder / "records").mkdir(parents=True)
    (folder / "scores").mkdir()
    scores = []
    for dataset in datasets:
        rng, noise = random.Random(dataset), random.Random(f"{dataset}/{run}")
        with (folder / "records" / file_name([dataset, "m"], ".jsonl")).open("w") as recs, \
             (folder / "scores" / file_name([dataset, "word_error_rate", "m"], ".jsonl")).open("w") as out:
            for i in range(samples):
                reference = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 25)))
                prediction = " ".join(w if noise.random() > 0.1 else noise.choice(WORDS) for w in reference.split())
                record = Record(id=f"s{i}", prompt="Transcribe.", system=None, params={}, reference=reference, prediction=prediction,
                                reply=prediction, attempts=1)
                recs.write(json.dumps(record.to_json()) + "\n")
                out.write(json.dumps(wer_line(record.id, reference, prediction)) + "\n")
        scores.append({"model": "m", "dataset": dataset, "metric": "word_error_rate", "score": 10.0, "num_samples": samples,
                       "num_failed": 0, "details": {}, "ci95": None, "stderr": None})
    (folder / "final_scores.json").write_text(json.dumps({"run_id": folder.name, "scores": scores, "failures": []}))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--samples", type=int, default=20_000, help="samples per run (spread over the datasets)")
    parser.add_argument("--datasets", type=int, default=4)
    parser.add_argument("--browser", action="store_true", help="open the page in headless Chromium and take a screenshot")
    parser.add_argument("--keep", help="write the runs and the page here instead of a temporary folder")
    args = parser.parse_args()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp())
    names = [f"set{i}" for i in range(args.datasets)]
    started = time.perf_counter()
    runs = [write_run(root, r, names, args.samples // args.datasets) for r in range(args.runs)]
    print(f"wrote {args.runs} runs × {args.samples} samples in {time.perf_counter() - started:.1f}s")
    started = time.perf_counter()
    page = root / "leaderboard.html"
    write_leaderboard(runs, page)
    print(f"lalmeval report: {time.perf_counter() - started:.1f}s, page {page.stat().st_size / 1e6:.1f} MB")
    if args.browser:
        chromium = shutil.which("chromium") or "/usr/bin/chromium"
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", f"--user-data-dir={root / 'profile'}"]
        started = time.perf_counter()
        dom = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=600).stdout
        print(f"chromium opened and ran it in {time.perf_counter() - started:.1f}s; rows in the DOM: {dom.count('<tr data-row=')}")
        subprocess.run([chromium, *flags, "--window-size=1600,1400", f"--screenshot={root / 'runs.png'}", page.as_uri()],
                       capture_output=True, timeout=600)
        print(f"screenshot: {root / 'runs.png'}")
    if not args.keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
