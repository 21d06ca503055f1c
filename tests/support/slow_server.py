"""A standalone OpenAI-compatible endpoint to `launch` in tests: fixed latency, echoes the prompt.

    python -m tests.support.slow_server --port P [--delay 0.2] [--progress-bytes N]

With --progress-bytes it first writes N bytes of '\\r'-separated progress to stdout with no newline
(as model servers' download bars do), then serves. Each reply is "echo: <last word of the prompt>".
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from aiohttp import web


def reply(text: str) -> dict:
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--progress-bytes", type=int, default=0)
    args = parser.parse_args()
    written = 0
    while written < args.progress_bytes:
        chunk = f"\rloading weights {written:>10} bytes"
        sys.stdout.write(chunk)
        written += len(chunk)
    sys.stdout.flush()

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        print("request", flush=True)  # tests watch the launch log for requests in flight
        texts = [p["text"] for m in body["messages"] if m["role"] == "user" for p in m["content"] if p.get("type") == "text"]
        await asyncio.sleep(args.delay)
        words = " ".join(texts).split()
        return web.json_response(reply(f"echo: {words[-1] if words else ''}"))

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "slow"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    print("serving", flush=True)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
