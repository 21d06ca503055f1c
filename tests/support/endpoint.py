"""A scripted OpenAI-compatible endpoint on 127.0.0.1, run in a background thread.

It stands in for an endpoint's behaviour (replies, latency, faults) and records every request.
"""

from __future__ import annotations

import asyncio
import base64
import io
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import soundfile as sf
from aiohttp import web


@dataclass
class Seen:
    """One request as the endpoint received it."""

    path: str
    headers: dict[str, str]
    query: dict[str, str]
    body: Optional[dict[str, Any]] = None
    form: Optional[dict[str, Any]] = None
    started: float = 0.0
    audio_seconds: list[float] = field(default_factory=list)
    concurrent: int = 0  # requests in flight when this one arrived, itself included

    @property
    def text(self) -> str:
        """The user text parts of a chat request."""
        if self.body is None:
            return self.form.get("prompt", "") if self.form else ""
        parts = [p for m in self.body["messages"] if m["role"] == "user" for p in m["content"] if p["type"] == "text"]
        return "\n".join(p["text"] for p in parts)

    @property
    def images(self) -> list[str]:
        """The image_url URLs of the user parts, in order."""
        return [p["image_url"]["url"] for m in (self.body or {}).get("messages", []) if m["role"] == "user"
                for p in m["content"] if isinstance(p, dict) and p.get("type") == "image_url"]

    @property
    def system(self) -> Optional[str]:
        msgs = [m for m in (self.body or {}).get("messages", []) if m["role"] == "system"]
        return msgs[0]["content"] if msgs else None


@dataclass
class Reply:
    """What the endpoint answers: a status, a JSON payload (or raw bytes), headers, a delay."""

    status: int = 200
    payload: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: Optional[bytes] = None
    drop: bool = False  # close the connection without answering


Handler = Callable[[Seen, int], Union[str, Reply]]


def chat_payload(text: Optional[str]) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


def answer_by_number(seen: Seen, n: int) -> str:
    """'answer N' for 'question N': the right reply to Workspace.text_questions."""
    return f"answer {seen.text.split()[-1]}"


def _audio_seconds(data: bytes) -> float:
    info = sf.info(io.BytesIO(data))
    return info.frames / info.samplerate


class ScriptedEndpoint:
    """Start with `with ScriptedEndpoint(handler) as ep:`; `ep.url` is the /v1 base URL."""

    def __init__(self, handler: Optional[Handler] = None, latency: float = 0.0, ssl_context: Optional[ssl.SSLContext] = None, port: int = 0):
        self.handler = handler or (lambda seen, n: "ok")
        self._want_port = port  # 0: any free port
        self.ssl_context = ssl_context  # serve https with this context's certificate
        self.latency = latency
        self.requests: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}/v1"

    async def _parse(self, request: web.Request) -> Seen:
        seen = Seen(request.path, dict(request.headers), dict(request.query), started=time.monotonic())
        if request.content_type == "multipart/form-data":
            form = await request.post()
            seen.form = {k: (v if isinstance(v, str) else v.file.read()) for k, v in form.items()}
            if isinstance(seen.form.get("file"), bytes):
                seen.audio_seconds.append(_audio_seconds(seen.form["file"]))
        else:
            seen.body = await request.json()
            for message in seen.body.get("messages", []):
                for part in message["content"] if isinstance(message["content"], list) else []:
                    data = (part.get("input_audio") or {}).get("data") or (part.get("audio_url") or {}).get("url", "").partition(",")[2]
                    if data:
                        seen.audio_seconds.append(_audio_seconds(base64.b64decode(data)))
        return seen

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        seen = await self._parse(request)
        with self._lock:
            index = len(self.requests)
            self.requests.append(seen)
            self.in_flight += 1
            seen.concurrent = self.in_flight
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            reply = self.handler(seen, index)
            if isinstance(reply, str):
                payload = {"text": reply} if seen.form is not None else chat_payload(reply)
                reply = Reply(payload=payload)
            await asyncio.sleep(self.latency + reply.delay)
            if reply.drop:
                request.transport.abort()
                return web.Response()
            if reply.raw is not None:
                return web.Response(status=reply.status, body=reply.raw, headers=reply.headers, content_type="application/json")
            return web.json_response(reply.payload, status=reply.status, headers=reply.headers)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "scripted"}]})

    def _route(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/audio/transcriptions", self._handle)
        app.router.add_get("/v1/models", self._models)

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        app = web.Application(client_max_size=512 * 1024 * 1024)
        self._route(app)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", self._want_port, ssl_context=self.ssl_context)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self._runner = runner
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())
        self._loop.close()

    def __enter__(self) -> "ScriptedEndpoint":
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def die(self) -> None:
        """Stop serving at once, as a crashed server would (callable from a handler)."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._loop.stop)

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


class AnyPathEndpoint(ScriptedEndpoint):
    """The scripted endpoint behind a gateway that keeps the key in the path (…/gw/<key>/v1/…): every POST
    is answered, every GET lists the models. Build URLs from `port`."""

    def _route(self, app: web.Application) -> None:
        app.router.add_post("/{tail:.*}", self._handle)
        app.router.add_get("/{tail:.*}", self._models)


class ForwardingProxy:
    """A gateway in front of another endpoint (as a LiteLLM proxy stands in front of vLLM): every request
    to `url` + path is forwarded to the upstream base URL + path, and the upstream's answer returned as is."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.forwarded = 0
        self._server = ScriptedEndpoint()
        self._server._route = self._route  # the same background-thread server, with forwarding routes

    @property
    def url(self) -> str:
        return self._server.url

    async def _forward(self, request: web.Request) -> web.Response:
        import aiohttp

        tail = request.path.removeprefix("/v1")
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "authorization", "api-key")}
        async with aiohttp.ClientSession() as session:
            async with session.request(request.method, self.upstream + tail, data=await request.read(), headers=headers) as resp:
                body = await resp.read()
                self.forwarded += request.method == "POST"
                return web.Response(status=resp.status, body=body, content_type=resp.content_type)

    def _route(self, app: web.Application) -> None:
        app.router.add_route("*", "/v1/{tail:.*}", self._forward)

    def __enter__(self) -> "ForwardingProxy":
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)
