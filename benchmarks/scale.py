"""Scale of a whole run through `bash evaluate.sh`: memory, time to first request, throughput, replicas.

    python benchmarks/scale.py [--only parquet100,parquet2000,clips20000,stream100k,slots,replicas] [--repeat N]

parquet100   100 clips of 3-7 s as FLAC bytes in one parquet, zero-latency endpoint: time to
             first request after `bash evaluate.sh` starts, wall time, samples/s end to end, peak RSS.
parquet2000  the same with 2000 clips.
clips20000   the same with 20 000 one-second clips; every sample scored.
stream100k   100 000 one-second clips listed in a jsonl: RSS sampled through the run (flat?).
slots        2000 clips of 5 s, endpoint 64 slots x 200 ms, batch_size 64: inference phase vs ideal.
replicas     two replicas, one 3x slower: share of requests each served; then one killed mid-run.
Each run is a fresh process (warm environment: the venv exists, files are in the page cache).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import soundfile as sf
import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "private_datasets" / "demo_commands"
REFERENCE = "set a timer for five minutes"


def make_flacs(folder: Path, seconds: list[float]) -> list[Path]:
    """One FLAC per length, chaining demo utterances (real speech)."""
    rows = [json.loads(line) for line in (DEMO / "demo_commands.jsonl").read_text().splitlines()]
    paths = []
    for index, length in enumerate(seconds):
        pieces, total, k = [], 0, index
        while total < length * 16000:
            audio, _ = sf.read(DEMO / rows[k % len(rows)]["audio"], dtype="float32")
            pieces.append(audio)
            total += len(audio)
            k += 7
        path = folder / f"clip{index:03d}.flac"
        sf.write(path, np.concatenate(pieces)[: int(length * 16000)], 16000)
        paths.append(path)
    return paths


def write_parquet(path: Path, clips: list[Path], rows: int) -> float:
    """`rows` rows whose audio struct holds the bytes of clips[i % len]; returns the file's MB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    blobs = [clip.read_bytes() for clip in clips]
    schema = pa.schema([("id", pa.string()), ("audio", pa.struct([("bytes", pa.binary()), ("path", pa.string())])), ("reference", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, 100):
            batch = [{"id": f"s{i:06d}", "audio": {"bytes": blobs[i % len(blobs)], "path": None}, "reference": REFERENCE} for i in range(start, min(rows, start + 100))]
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
    return path.stat().st_size / 1e6


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


def stats_of(base: str) -> dict:
    return json.load(urllib.request.urlopen(base + "/stats"))


def write_config(work: Path, data: str, models: list[dict]) -> Path:
    (work / "runspecs" / "bench").mkdir(parents=True, exist_ok=True)
    spec = {"bench_set": {"hf_repo": f"../../{data}", "language": "en", "id_column": "id", "metrics": ["word_error_rate"]}}
    (work / "runspecs" / "bench" / "bench.json").write_text(json.dumps(spec))
    config = {"dataset_metric": [["bench_set", "word_error_rate"]], "models": models, "runspec_dirs": ["runspecs"], "output_dir": str(work / "runs")}
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def evaluate(config: Path, run_id: str, sample_rss: bool = False) -> dict:
    """Run `bash evaluate.sh` as a user would; wall time, exit code, the python process's peak RSS."""
    started = time.time()
    proc = subprocess.Popen(["bash", "evaluate.sh", "--config", str(config), "--run-id", run_id, "--no-cache"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    trace: list[tuple[float, float]] = []
    done = threading.Event()
    if sample_rss:
        threading.Thread(target=_sample_rss, args=(proc.pid, started, trace, done), daemon=True).start()
    stderr_lines: list[str] = []
    reader = threading.Thread(target=lambda: stderr_lines.extend(proc.stderr), daemon=True)
    reader.start()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS, not the endpoint's
    done.set()
    reader.join(5)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"started": started, "wall": time.time() - started, "code": proc.returncode,
            "peak_mb": usage.ru_maxrss / 1024, "trace": trace, "stderr": "".join(stderr_lines[-5:])}


def _sample_rss(pid: int, started: float, trace: list, done: threading.Event) -> None:
    while not done.is_set():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    trace.append((time.time() - started, int(line.split()[1]) / 1024))
        except OSError:
            return
        done.wait(0.5)


def final(work: Path, run_id: str) -> dict:
    return json.loads((work / "runs" / run_id / "final_scores.json").read_text())["scores"][0]


def model(base: str, name: str = "bench", batch: int = 64, **extra) -> dict:
    return {"name": name, "url": base + "/v1", "model": "bench", "batch_size": batch, "timeout": 60, **extra}


def _spread(values: list[float], digits: int = 0) -> str:
    """'median (min-max)' of repeated measurements."""
    ordered = sorted(values)
    median = ordered[len(ordered) // 2] if len(ordered) % 2 else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2
    return f"{median:.{digits}f}" + (f" ({ordered[0]:.{digits}f}-{ordered[-1]:.{digits}f})" if len(ordered) > 1 else "")


def parquet_run(work: Path, label: str, rows: int, seconds: list[float], repeat: int) -> None:
    """`rows` clips (cycling through `seconds`) as FLAC in one parquet, zero-latency endpoint."""
    clips = make_flacs(work, seconds)
    mb = write_parquet(work / f"{label}.parquet", clips, rows)
    firsts, walls, peaks = [], [], []
    for attempt in range(repeat):
        proc, base = start_endpoint(0.0, 64)
        try:
            out = evaluate(write_config(work, f"{label}.parquet", [model(base)]), f"{label}-{attempt}")
            stats = stats_of(base)
        finally:
            proc.terminate()
        score = final(work, f"{label}-{attempt}")
        assert out["code"] == 0 and score["num_samples"] == rows and score["num_failed"] == 0, (out, score)
        firsts.append(stats["first_arrival"] - out["started"])
        walls.append(out["wall"])
        peaks.append(out["peak_mb"])
    print(f"{label:<12} {rows} clips of {min(seconds):g}-{max(seconds):g} s ({mb:.0f} MB of FLAC in a parquet), zero latency, "
          f"{repeat} run(s), median (range): first request {_spread(firsts, 2)} s after `bash evaluate.sh` started; "
          f"wall {_spread(walls, 1)} s; {_spread([rows / wall for wall in walls])} samples/s end to end; peak RSS {_spread(peaks)} MB")


def parquet100(work: Path, repeat: int = 1) -> None:
    parquet_run(work, "parquet100", 100, [3 + 4 * i / 49 for i in range(50)], repeat)


def parquet2000(work: Path, repeat: int = 1) -> None:
    parquet_run(work, "parquet2000", 2000, [3 + 4 * i / 49 for i in range(50)], repeat)


def clips20000(work: Path, repeat: int = 1) -> None:
    parquet_run(work, "clips20000", 20000, [1.0 + i / 500 for i in range(50)], repeat)


def stream100k(work: Path) -> None:
    clips = make_flacs(work, [1.0 + i / 500 for i in range(50)])
    rows = "".join(json.dumps({"id": f"s{i:06d}", "audio": clips[i % 50].name, "reference": REFERENCE}) + "\n" for i in range(100_000))
    (work / "set100k.jsonl").write_text(rows)
    proc, base = start_endpoint(0.0, 64)
    try:
        out = evaluate(write_config(work, "set100k.jsonl", [model(base)]), "s100k", sample_rss=True)
    finally:
        proc.terminate()
    score = final(work, "s100k")
    assert out["code"] == 0 and score["num_samples"] == 100_000 and score["num_failed"] == 0, (out, score)
    trace = out["trace"]
    marks = [trace[min(len(trace) - 1, int(len(trace) * q))] for q in (0.1, 0.25, 0.5, 0.75, 0.99)]
    print(f"stream100k   100 000 one-second clips (jsonl of paths): {100_000 / out['wall']:.0f} samples/s ({out['wall']:.0f} s); "
          f"RSS at 10/25/50/75/99% of the run: {' / '.join(f'{mb:.0f}' for _, mb in marks)} MB; peak {out['peak_mb']:.0f} MB")


def slots(work: Path) -> None:
    clips = make_flacs(work, [5.0] * 50)
    write_parquet(work / "set5s.parquet", clips, 2000)
    proc, base = start_endpoint(0.2, 64)
    try:
        out = evaluate(write_config(work, "set5s.parquet", [model(base)]), "slots")
        stats = stats_of(base)
    finally:
        proc.terminate()
    assert out["code"] == 0, out
    ideal = 2000 / 64 * 0.2
    busy = stats["last_end"] - stats["first_start"]
    print(f"slots        2000 clips x 5 s, endpoint 64 slots x 200 ms: busy span {busy:.2f} s vs ideal {ideal:.2f} s -> "
          f"{ideal / busy:.3f} of ideal (max in flight {stats['max_in_flight']}); whole run {out['wall']:.2f} s")


def replicas(work: Path) -> None:
    clips = make_flacs(work, [2.0 + i / 50 for i in range(50)])
    write_parquet(work / "set1000.parquet", clips, 1000)
    fast, fast_url = start_endpoint(0.1, 16)
    slow, slow_url = start_endpoint(0.3, 16)
    try:
        config = write_config(work, "set1000.parquet", [model(fast_url, "fast", 16), model(slow_url, "slow", 16)])
        out = evaluate(config, "split")
        served = stats_of(fast_url)["requests"], stats_of(slow_url)["requests"]
    finally:
        fast.terminate()
        slow.terminate()
    assert out["code"] == 0, out
    print(f"replicas     1000 clips, two replicas of 16 slots, 100 ms vs 300 ms: fast served {served[0]} "
          f"({100 * served[0] / sum(served):.0f}%), slow {served[1]}; {out['wall']:.1f} s")
    fast, fast_url = start_endpoint(0.1, 16)
    doomed, doomed_url = start_endpoint(0.1, 16)
    try:
        config = write_config(work, "set1000.parquet", [model(fast_url, "a", 16, retry_attempts=1), model(doomed_url, "b", 16, retry_attempts=1)])
        threading.Timer(2.0, doomed.kill).start()  # dies with requests in flight
        out = evaluate(config, "killed")
    finally:
        fast.terminate()
    score = final(work, "killed")
    print(f"             same, one replica killed 2 s into the run: {score['num_samples']} samples, {score['num_failed']} failed, "
          f"exit code {out['code']}; {out['wall']:.1f} s")


SCENARIOS = {"parquet100": parquet100, "parquet2000": parquet2000, "clips20000": clips20000, "stream100k": stream100k, "slots": slots, "replicas": replicas}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each parquet scenario (the shared VM varies run to run)")
    args = parser.parse_args()
    for name in args.only.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            if name.startswith(("parquet", "clips")):
                SCENARIOS[name](Path(tmp), args.repeat)
            else:
                SCENARIOS[name](Path(tmp))


if __name__ == "__main__":
    main()
