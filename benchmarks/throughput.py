"""Throughput of lalmeval against a local endpoint with set latency and capacity.

    python benchmarks/throughput.py [--clips 2000] [--seconds 5]

(a) 64 slots × 200 ms, batch_size 64: wall time of the inference phase against the ideal
    clips / 64 × 0.2 s.
(b) zero latency: samples per second end to end, and the harness's peak RSS.
Clips are real speech (the demo set) concatenated to ~5 s and stored as FLAC, one file per
distinct clip; every sample is decoded, resampled, encoded and sent independently.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lalmeval.config import parse_config  # noqa: E402
from lalmeval.options import RunOptions  # noqa: E402
from lalmeval.plan import build_plan  # noqa: E402
from lalmeval.runner import run  # noqa: E402

DEMO = REPO / "private_datasets" / "demo_commands"


def make_clips(folder: Path, distinct: int, seconds: float) -> list[str]:
    """`distinct` FLAC files of ~`seconds` each, made by chaining demo utterances."""
    rows = [json.loads(line) for line in (DEMO / "demo_commands.jsonl").read_text().splitlines()]
    names = []
    for index in range(distinct):
        pieces, total, k = [], 0, index
        while total < seconds * 16000:
            audio, _ = sf.read(DEMO / rows[k % len(rows)]["audio"], dtype="float32")
            pieces.append(audio)
            total += len(audio)
            k += 7
        name = f"clip{index:03d}.flac"
        sf.write(folder / name, np.concatenate(pieces)[: int(seconds * 16000)], 16000)
        names.append(name)
    return names


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_endpoint(latency: float, capacity: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "endpoint.py"), "--port", str(port), "--latency", str(latency), "--capacity", str(capacity)])
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1)
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("benchmark endpoint did not start")


def run_once(work: Path, clips: int, latency: float, capacity: int, batch_size: int) -> dict:
    proc, base = start_endpoint(latency, capacity)
    try:
        config = {
            "dataset_metric": [["bench_clips", "word_error_rate"]],
            "models": [{"name": "bench", "url": base + "/v1", "model": "bench", "batch_size": batch_size, "timeout": 60}],
            "runspec_dirs": ["runspecs"],
        }
        plan = build_plan(parse_config(config, "bench"), work / "config.yaml")
        cpu0, started = _cpu_self(), time.perf_counter()
        # The clips repeat, so the inference cache would answer most requests: measure without it.
        result = run(plan, work / "runs", f"lat{latency}", quiet=True, options=RunOptions(use_cache=False))
        wall, cpu = time.perf_counter() - started, _cpu_self() - cpu0
        stats = json.load(urllib.request.urlopen(base + "/stats"))
        stats["endpoint_cpu"] = _cpu_of(proc.pid)
    finally:
        proc.terminate()
        proc.wait()
    assert stats["requests"] == clips and result.scores[0].num_failed == 0, (stats, result.scores)
    return {"wall": wall, "inference": stats["last_end"] - stats["first_start"], "max_in_flight": stats["max_in_flight"],
            "mb_sent": stats["bytes"] / 1e6, "cpu_ms": 1000 * cpu / clips, "endpoint_cpu_ms": 1000 * stats["endpoint_cpu"] / clips}


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clips", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--distinct", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "data").mkdir()
        names = make_clips(work / "data", args.distinct, args.seconds)
        rows = [{"id": f"s{i:05d}", "audio": names[i % len(names)], "reference": "set a timer for five minutes"} for i in range(args.clips)]
        (work / "data" / "clips.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (work / "runspecs" / "bench").mkdir(parents=True)
        spec = {"bench_clips": {"hf_repo": "../../data/clips.jsonl", "language": "en", "id_column": "id"}}
        (work / "runspecs" / "bench" / "bench.json").write_text(json.dumps(spec))

        ideal = args.clips / 64 * 0.2
        a = run_once(work, args.clips, 0.2, 64, 64)
        print(f"(a) {args.clips} clips x {args.seconds:g} s, endpoint 64 slots x 200 ms, batch_size 64")
        print(f"    inference phase {a['inference']:.2f} s vs ideal {ideal:.2f} s -> {ideal / a['inference']:.3f} of ideal; "
              f"whole run {a['wall']:.2f} s; max in flight {a['max_in_flight']}; {a['mb_sent']:.0f} MB sent")
        b = run_once(work, args.clips, 0.0, 64, 64)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"(b) zero latency: {args.clips / b['wall']:.0f} samples/s end to end ({b['wall']:.2f} s), "
              f"{args.clips / b['inference']:.0f}/s during inference; peak RSS {rss:.0f} MB")
        print(f"    CPU per sample: harness {b['cpu_ms']:.2f} ms, endpoint {b['endpoint_cpu_ms']:.2f} ms")


if __name__ == "__main__":
    main()
