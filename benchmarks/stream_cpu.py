"""Client CPU per request of a streamed reply against the same reply sent whole (the budget: at most 1.3x).

    python benchmarks/stream_cpu.py [--requests 160] [--concurrency 8] [--rounds 5] [--reply spoken|written] [--handling-only] [--instant-whole]

A server in another process answers every chat request with one fixed reply, either as one chat.completion or as
OpenAI-style SSE chunks, one network write per chunk, spaced 1 ms apart so that each arrives in a read of its own
(the client's worst case: a real server spaces them further). The whole reply comes after the same pauses, as a
model takes as long to say a reply whole as to stream it (with --instant-whole, at once: the client then also pays
for waking from the stream's pauses that the whole path never makes, which shows as CPU of its own). Two replies: a spoken one (a 60-word transcript and
5 s of pcm16 audio in 0.2 s deltas, as OpenAI streams them) and a written one (300 text deltas). The client is
lalmeval's own: one Endpoint, the chat protocol's parse, and the spoken reply's audio decoded as the run keeps it.
Only this process's CPU time is counted (time.process_time), so the server's work never enters the figures.

The two paths take turns batch by batch (a batch: `--concurrency` requests at once; whole, streamed, whole, ...), each
path on its own kept-alive connections, so that a drift in the machine's speed falls on both alike; each case prints the
median per-request CPU of each path over the rounds, its range, the median of the rounds' ratios and the load average,
since a shared machine's figures move with it. The client runs as a run runs it: uvloop, the run's GIL switch interval
and its frozen garbage-collector generation (`_event_loop_run`).

Each case is measured twice: per request as a run makes it (a 2.2 s demo clip read, resampled and sent as base64 WAV,
the reply read and its audio decoded), which is the budget's figure; and the reply's handling alone (a bare text
prompt), which shows what streaming itself costs.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing
import os
import socket
import statistics
import time

import numpy as np
from aiohttp import web

from lalmeval.config.schema import ModelInfo
from lalmeval.inference.client import Endpoint
from lalmeval.inference.protocols import PROTOCOLS
from lalmeval.media.audio import prepare
from lalmeval.results.records import Prompt
from lalmeval.results.spoken import decoded
from lalmeval.run.runner import _event_loop_run
from lalmeval.serve.speech import interleaved
from lalmeval.catalog.bundled import ROOT

CLIP = ROOT / "private_datasets" / "demo_commands" / "audio" / "000.flac"

WORDS = ("the quick brown fox jumps over the lazy dog and then " * 6).split()[:60]


def _replies(spoken: bool) -> tuple[bytes, list[bytes]]:
    """(the whole completion, the SSE events) of one reply."""
    text = " ".join(WORDS if spoken else (WORDS * 5)[:300])
    pcm = (np.sin(np.arange(5 * 24000) / 8) * 9000).astype("<i2").tobytes() if spoken else b""
    if spoken:
        message = {"role": "assistant", "content": None, "audio": {"id": "a", "data": base64.b64encode(pcm).decode(), "transcript": text}}
    else:
        message = {"role": "assistant", "content": text}
    whole = json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": {"completion_tokens": 300}}).encode()
    words = [(" " if i else "") + w for i, w in enumerate(text.split(" "))]
    if spoken:   # as OpenAI streams a spoken reply (and lalmeval serve does): transcript and audio side by side
        deltas = [{"audio": d} for d in interleaved(words, [pcm[at:at + 9600] for at in range(0, len(pcm), 9600)])]
    else:
        deltas = [{"content": w} for w in words]
    events = [f"data: {json.dumps({'choices': [{'index': 0, 'delta': d, 'finish_reason': None}]})}\n\n".encode() for d in deltas]
    events.append(b'data: {"choices": [], "usage": {"completion_tokens": 300}}\n\ndata: [DONE]\n\n')
    return whole, events


def _serve(port: int, paced: bool = True) -> None:
    replies = {spoken: _replies(spoken) for spoken in (True, False)}

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        whole, events = replies["audio" in body.get("modalities", [])]
        if not body.get("stream"):
            if paced:   # the model takes as long to say it whole as to stream it
                for _ in events:
                    await asyncio.sleep(0.001)
            return web.Response(body=whole, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            await response.write(event)
            await asyncio.sleep(0.001)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


async def _measure(url: str, spoken: bool, requests: int, concurrency: int, clip: bytes = b"") -> tuple[float, float]:
    """Client CPU seconds per request of the whole path and of the streamed one, taking turns batch by batch (a batch:
    `concurrency` requests at once), so that a drift in the machine's speed falls on both alike. With `clip`, each
    request is built from it as a run builds one (decoded, resampled, base64 WAV in the body), else the request is a
    bare text prompt and only the reply's handling counts."""
    extra = {"modalities": ["text", "audio"], "audio": {"format": "pcm16"}} if spoken else {}
    protocol = PROTOCOLS.get("openai")
    paths = []
    for stream in (False, True):
        info = ModelInfo(name="bench", url=url, model="bench", batch_size=concurrency, stream=stream, **extra)
        endpoint = Endpoint(info)
        await endpoint.open()
        bare = json.dumps({"model": "bench", "messages": [{"role": "user", "content": "hi"}], **_fields(info)}).encode()
        paths.append((info, endpoint, bare))

    async def one(info: ModelInfo, endpoint: Endpoint, bare: bytes) -> None:
        body = bare
        if clip:
            audio = prepare(clip)
            body, _ = protocol.body(info, Prompt("Transcribe the audio."), [audio], {"temperature": 0.0}, "en")
        reply = await endpoint.post(protocol.path, body, "application/json", protocol.parse)
        if reply.value.audio is not None:
            decoded(reply.value.audio.data)   # as the run keeps it (there, in a thread: the same CPU)
        assert reply.value.text.startswith("the quick")

    for path in paths:   # warm each pool and its code paths
        await asyncio.gather(*(one(*path) for _ in range(concurrency)))
    spent = [0.0, 0.0]
    batches = requests // concurrency
    for _ in range(batches):
        for index, path in enumerate(paths):
            started = time.process_time()
            await asyncio.gather(*(one(*path) for _ in range(concurrency)))
            spent[index] += time.process_time() - started
    for _, endpoint, _ in paths:
        await endpoint.close()
    return spent[0] / (batches * concurrency), spent[1] / (batches * concurrency)


def _fields(info: ModelInfo) -> dict:
    out: dict = {"stream": True} if info.stream else {}
    if info.speaks:
        out.update(modalities=["text", "audio"], audio={"voice": "alloy", "format": "pcm16"})
    return out


def _wait_for(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _case(url: str, spoken: bool, clip: bytes, args: argparse.Namespace) -> str:
    """One case over its rounds: medians, ranges and the median ratio."""
    whole, streamed = [], []
    for _ in range(args.rounds):
        cpu = _event_loop_run(_measure(url, spoken, args.requests, args.concurrency, clip))   # as a run runs: uvloop, its GIL switch interval
        whole.append(cpu[0])
        streamed.append(cpu[1])
    ratios = [s / w for s, w in zip(streamed, whole)]
    shown = lambda xs: f"{statistics.median(xs) * 1e3:.2f} ms ({min(xs) * 1e3:.2f}-{max(xs) * 1e3:.2f})"
    return (f"whole {shown(whole)}, streamed {shown(streamed)}, ratio {statistics.median(ratios):.2f}x "
            f"({min(ratios):.2f}-{max(ratios):.2f}), load {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=160, help="requests per path and round")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each of --requests per path taking turns by batch")
    parser.add_argument("--reply", choices=("spoken", "written", "both"), default="both", help="which reply to measure")
    parser.add_argument("--handling-only", action="store_true", help="only the reply's handling (a text prompt in)")
    parser.add_argument("--instant-whole", action="store_true", help="send the whole reply at once, not after the stream's pauses")
    args = parser.parse_args()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(port, not args.instant_whole), daemon=True)
    server.start()
    _wait_for(port)
    url = f"http://127.0.0.1:{port}/v1"
    clip = CLIP.read_bytes()
    print(f"client CPU per request, median (range) over {args.rounds} rounds of {args.requests} requests per path, taking turns by batch, "
          f"{args.concurrency} in flight; the whole reply sent {'at once' if args.instant_whole else 'after the pauses of the stream'}")
    try:
        for spoken in [kind == "spoken" for kind in ("spoken", "written") if args.reply in (kind, "both")]:
            kind = "spoken reply (60 words, 5 s pcm16)" if spoken else "written reply (300 text deltas)"
            for label, audio in (("request as a run sends it (a demo clip in)", clip), ("reply handling only (text prompt in)", b"")):
                if args.handling_only and audio:
                    continue
                print(f"{kind}, {label}: {_case(url, spoken, audio, args)}", flush=True)
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
