"""How long score intervals and paired comparisons take: 100k samples × 1000 resamples by default.

Per-sample statistics come from real scoring of synthetic sentence pairs (sacrebleu BLEU and chrF
segment statistics, WER errors and reference words), repeated up to the sample count. Prints
wall-clock seconds per step and the peak resident memory.

    python benchmarks/bootstrap.py [--samples 100000] [--resamples 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lalmeval.metrics.base import MetricContext  # noqa: E402
from lalmeval.metrics.bleu import Bleu, Chrf  # noqa: E402
from lalmeval.metrics.wer import WordErrorRate  # noqa: E402
from lalmeval.postprocess.general import GeneralPostprocessor  # noqa: E402
from lalmeval.results.records import Record  # noqa: E402
from lalmeval.catalog.runspecs import Dataset, DatasetSpec  # noqa: E402
from lalmeval.stats import bootstrap, paired_bootstrap  # noqa: E402

WORDS = "the a cat dog sat ran on under mat house big small red green quickly slowly today we they saw".split()


def pairs(count: int, seed: int) -> list[tuple[str, str]]:
    """(hypothesis, reference) pairs: references of 5-25 words, hypotheses with ~20% of words changed."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        reference = [rng.choice(WORDS) for _ in range(rng.randint(5, 25))]
        hypothesis = [w if rng.random() > 0.2 else rng.choice(WORDS) for w in reference]
        out.append((" ".join(hypothesis), " ".join(reference)))
    return out


def metric(cls: type, resamples: int) -> object:
    dataset = Dataset("bench", "c", "t", DatasetSpec(hf_repo="x", language="en"), Path("x.json"))
    return cls(dataset, GeneralPostprocessor(), MetricContext(resamples=resamples, seed=0))


def items_for(scorer: object, texts: list[tuple[str, str]], samples: int) -> tuple[list[dict], float]:
    """Score the distinct pairs once, repeat the items up to `samples` (with distinct ids); seconds per distinct pair."""
    started = time.perf_counter()
    distinct = [scorer.score_record(Record(id="", prompt="", system=None, params={}, reference=r, prediction=h)) for h, r in texts]
    per_pair = (time.perf_counter() - started) / len(texts)
    return [{**distinct[i % len(distinct)], "id": f"{i:07d}"} for i in range(samples)], per_pair


def timed(label: str, repeat: int, run) -> None:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    print(f"{label:<44} {min(times):7.2f} s (min of {repeat}; max {max(times):.2f} s)   {result}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    texts = pairs(2000, seed=1)
    other = pairs(2000, seed=2)
    print(f"{args.samples} samples x {args.resamples} resamples, numpy {np.__version__}")
    for name, cls in (("word_error_rate", WordErrorRate), ("bleu", Bleu), ("chrf", Chrf)):
        scorer = metric(cls, args.resamples)
        items, per_pair = items_for(scorer, texts, args.samples)
        rival, _ = items_for(scorer, other, args.samples)
        value, _ = scorer.aggregate(items)
        stats, rival_stats = scorer.sample_stats(items), scorer.sample_stats(rival)
        print(f"{name}: score {value:.3f}, {stats.values.shape[1]} statistics per sample, scoring {1e3 * per_pair:.3f} ms per sample")
        timed(f"  {name} ci95 (bootstrap)", args.repeat,
              lambda: "[{:.3f}, {:.3f}]".format(*bootstrap(stats, value, args.resamples, 0).ci95))
        timed(f"  {name} paired comparison", args.repeat,
              lambda: "p = {:.4f}".format(paired_bootstrap(stats, rival_stats, args.resamples, 0)["p_value"]))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()
