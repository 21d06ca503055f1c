"""A minimal OpenAI-compatible endpoint with a fixed latency and a fixed number of slots.

    python benchmarks/endpoint.py --port 8123 --latency 0.2 --capacity 64

It reads each request body whole (as a real server must) and answers a fixed text (`--reply`; by
default a transcript, e.g. `Rating: 1` for a judge).
GET /stats returns the request count and the first start / last finish times.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from aiohttp import web

TRANSCRIPT = "set a timer for five minutes"


def reply_body(text: str) -> bytes:
    return json.dumps({
        "id": "bench", "object": "chat.completion", "model": "bench",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }).encode()


def make_app(latency: float, capacity: int, reply: str = TRANSCRIPT) -> web.Application:
    answer = reply_body(reply)
    slots = asyncio.Semaphore(capacity)
    stats = {"requests": 0, "bytes": 0, "first_arrival": None, "first_start": None, "last_end": None, "max_in_flight": 0}
    in_flight = 0

    async def chat(request: web.Request) -> web.Response:
        nonlocal in_flight
        stats["first_arrival"] = stats["first_arrival"] or time.time()
        body = await request.read()
        async with slots:
            in_flight += 1
            stats["max_in_flight"] = max(stats["max_in_flight"], in_flight)
            now = time.time()
            stats["first_start"] = stats["first_start"] or now
            if latency:
                await asyncio.sleep(latency)
            in_flight -= 1
        stats["requests"] += 1
        stats["bytes"] += len(body)
        stats["last_end"] = time.time()
        return web.Response(body=answer, content_type="application/json")

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "bench"}]})

    async def get_stats(request: web.Request) -> web.Response:
        return web.json_response(stats)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stats", get_stats)
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--capacity", type=int, default=64)
    parser.add_argument("--reply", default=TRANSCRIPT, help="the text every reply holds")
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    web.run_app(make_app(args.latency, args.capacity, args.reply), host="127.0.0.1", port=args.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
