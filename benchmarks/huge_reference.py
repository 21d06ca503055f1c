"""How long a row with a huge reference takes to fail: a jsonl of three rows, the middle one's reference
300 MB by default, read as a run reads it (open, select, every sample). Prints wall-clock seconds and
the peak resident memory; the huge sample fails with the size limit, the others are kept.

    python benchmarks/huge_reference.py [--mb 300]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lalmeval.catalog.runspecs import Dataset, DatasetSpec  # noqa: E402
from lalmeval.data.source import iter_samples  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=300, help="size of the huge reference in MB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "set.jsonl"
        with path.open("w") as out:
            out.write(json.dumps({"id": "a", "question": "q", "reference": "small"}) + "\n")
            out.write('{"id": "b", "question": "q", "reference": "' + "word " * (args.mb * 1024 * 1024 // 5) + '"}\n')
            out.write(json.dumps({"id": "c", "question": "q", "reference": "small"}) + "\n")
        spec = DatasetSpec(hf_repo=str(path), language="english", id_column="id", modality="text", textual_input_column="question", audio_column=None)
        dataset = Dataset("huge", "qa", "questions", spec, Path(folder) / "runspec.json")
        started = time.perf_counter()
        samples = list(iter_samples(dataset))
        took = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    problems = {s.id: s.problem for s in samples}
    print(f"{args.mb} MB reference: {len(samples)} samples read in {took:.2f} s, peak RSS {peak_mb:,.0f} MB")
    print(f"  b: {problems['b']}")
    print(f"  a, c: {problems['a']!r}, {problems['c']!r}")


if __name__ == "__main__":
    main()
