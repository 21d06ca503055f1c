"""What a record's `latency` measures: a 200 ms endpoint evaluated with a batch_size smaller than the work
lalmeval has ready, so samples wait for a slot. `latency` should sit at the endpoint's 200 ms; the wait is
`queued`, and latency + queued is what the old single figure reported.

    python benchmarks/latency.py [--samples 200] [--batch-size 4] [--server-latency 0.2]

Runs `lalmeval run` in a subprocess, as a user would, against benchmarks/endpoint.py (a separate process
with a fixed latency and 64 slots), on the bundled demo clips, cache off.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "private_datasets" / "demo_commands"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def workspace(root: Path, samples: int, port: int, batch_size: int) -> Path:
    """A runspec over `samples` demo clips (cycled) and a config pointing at the endpoint."""
    rows = [json.loads(line) for line in (DEMO / "demo_commands.jsonl").read_text().splitlines()]
    data = [{"id": f"s{i}", "audio": str(DEMO / rows[i % len(rows)]["audio"]), "text": rows[i % len(rows)]["reference"]} for i in range(samples)]
    (root / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    (root / "runspecs" / "bench").mkdir(parents=True)
    spec = {"clips": {"hf_repo": "../../data.jsonl", "language": "english", "id_column": "id", "target_column": "text", "metrics": ["word_error_rate"]}}
    (root / "runspecs" / "bench" / "latency.json").write_text(json.dumps(spec))
    config = root / "config.yaml"
    config.write_text(json.dumps({
        "dataset_metric": [["clips", "word_error_rate"]], "runspec_dirs": ["runspecs"], "output_dir": str(root / "runs"),
        "models": [{"info": {"name": "bench", "url": f"http://127.0.0.1:{port}/v1", "model": "bench", "batch_size": batch_size}}],
    }))
    return config


def wait_for(url: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--server-latency", type=float, default=0.2)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "endpoint.py"), "--port", str(port),
                               "--latency", str(args.server_latency), "--capacity", "64"], stdout=subprocess.DEVNULL)
    try:
        wait_for(f"http://127.0.0.1:{port}/v1/models")
        with tempfile.TemporaryDirectory() as tmp:
            config = workspace(Path(tmp), args.samples, port, args.batch_size)
            subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "r", "--no-cache"],
                           cwd=REPO, check=True, stdout=subprocess.DEVNULL)
            records = [json.loads(line) for line in (Path(tmp) / "runs" / "r" / "records" / "clips__bench.jsonl").read_text().splitlines()]
    finally:
        server.terminate()
        server.wait()
    latency = [r["latency"] for r in records]
    queued = [r["queued"] for r in records]
    both = [a + b for a, b in zip(latency, queued)]
    print(f"{len(records)} samples, endpoint {args.server_latency:g} s, batch_size {args.batch_size}")
    print(f"latency        p50 {quantile(latency, 0.5):.3f} s  p90 {quantile(latency, 0.9):.3f} s")
    print(f"queued         p50 {quantile(queued, 0.5):.3f} s  p90 {quantile(queued, 0.9):.3f} s")
    print(f"latency+queued p50 {quantile(both, 0.5):.3f} s  (what a single figure would have said)")


if __name__ == "__main__":
    main()
