"""Throughput and latency of `lalmeval serve` for each bundled model at 1, 8 and 32 concurrent requests.

    python benchmarks/server.py                                   # whisper-tiny.en and pocketsphinx
    python benchmarks/server.py --models whisper-tiny.en --levels 1,8 --requests 40

Each model is served as a user would (`lalmeval serve --model M`, a separate process); the client
sends the bundled demo_commands clips as chat completions with `input_audio` parts, exactly as
`lalmeval run` does, keeping N requests in flight until `--requests` have been answered. One
warm-up request per model is not counted. Prints requests/s and the median and 95th-percentile
latency per level, and how many batches the server ran (its /health statistics).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "private_datasets" / "demo_commands"


def clips() -> list[str]:
    rows = [json.loads(line) for line in (DEMO / "demo_commands.jsonl").read_text().splitlines()]
    return [base64.b64encode((DEMO / row["audio"]).read_bytes()).decode() for row in rows]


def start(model: str) -> tuple[subprocess.Popen, str]:
    """`lalmeval serve --model M --port 0`, and its URL once it listens."""
    proc = subprocess.Popen([sys.executable, "-m", "lalmeval", "serve", "--model", model, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        match = re.search(r"on (http://\S+/v1)", line)
        if match:
            return proc, match.group(1)
    raise SystemExit(f"lalmeval serve --model {model} ended before it listened (exit {proc.wait()})")


async def ask(session: aiohttp.ClientSession, url: str, model: str, clip: str) -> float:
    body = {"model": model, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Transcribe the spoken command."},
        {"type": "input_audio", "input_audio": {"data": clip, "format": "flac"}}]}]}
    started = time.perf_counter()
    async with session.post(f"{url}/chat/completions", json=body) as response:
        payload = await response.json()
        if response.status != 200:
            raise SystemExit(f"HTTP {response.status}: {payload}")
    return time.perf_counter() - started


async def level(url: str, model: str, data: list[str], concurrency: int, total: int) -> dict[str, float]:
    """`total` requests with `concurrency` in flight: requests/s, p50 and p95 latency."""
    latencies: list[float] = []
    next_index = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal next_index
        while next_index < total:
            index = next_index
            next_index += 1
            latencies.append(await ask(session, url, model, data[index % len(data)]))

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        await ask(session, url, model, data[0])  # warm-up, not counted
        async with session.get(url.removesuffix("/v1") + "/health") as response:
            before = await response.json()
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        wall = time.perf_counter() - started
        async with session.get(url.removesuffix("/v1") + "/health") as response:
            after = await response.json()
    latencies.sort()
    batches = after["batches"] - before["batches"]
    return {"rps": total / wall, "p50": statistics.median(latencies), "p95": latencies[max(0, int(0.95 * len(latencies)) - 1)],
            "wall": wall, "per_batch": (after["batched_requests"] - before["batched_requests"]) / max(1, batches)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="whisper-tiny.en,pocketsphinx", help="comma-separated built-in models or module:Class")
    parser.add_argument("--levels", default="1,8,32", help="concurrent requests per level (comma-separated)")
    parser.add_argument("--requests", type=int, default=40, help="requests answered per level (default: 40, the demo set once)")
    args = parser.parse_args()
    data = clips()
    print("| model | in flight | requests/s | p50 latency | p95 latency | requests per batch |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model in args.models.split(","):
        proc, url = start(model)
        try:
            served = asyncio.run(_model_id(url))
            for concurrency in (int(n) for n in args.levels.split(",")):
                r = asyncio.run(level(url, served, data, concurrency, args.requests))
                print(f"| {model} | {concurrency} | {r['rps']:.2f} | {r['p50']:.2f} s | {r['p95']:.2f} s | {r['per_batch']:.1f} |", flush=True)
        finally:
            proc.terminate()
            proc.wait(30)


async def _model_id(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/models") as response:
        return (await response.json())["data"][0]["id"]


if __name__ == "__main__":
    main()
