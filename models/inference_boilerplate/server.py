"""OpenAI-compatible HTTP server around an AudioModel.

    python -m models.inference_boilerplate.server --model pocketsphinx --port 8011
    python -m models.inference_boilerplate.server --model my_package.my_module:MyModel

Routes: POST /v1/chat/completions, POST /v1/audio/transcriptions, GET /v1/models, GET /health.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import importlib
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

import numpy as np
from aiohttp import web

from lalmeval.data.audio import AudioError, decode
from models.inference_boilerplate.model import AudioModel, ChatInput

BUILTIN = {"pocketsphinx": "models.inference_boilerplate.pocketsphinx_demo:PocketsphinxCommands"}
MODEL = web.AppKey("model", AudioModel)
POOL = web.AppKey("pool", ThreadPoolExecutor)


class BadRequest(Exception):
    """A request the server refuses with HTTP 400 and this message."""


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error", "code": status}}, status=status)


def _audio_from_data(data: str) -> np.ndarray:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("audio data is not valid base64") from None
    try:
        return decode(raw)
    except AudioError as exc:
        raise BadRequest(str(exc)) from None


def _audio_part(part: dict[str, Any]) -> np.ndarray:
    if part.get("type") == "input_audio":
        return _audio_from_data((part.get("input_audio") or {}).get("data", ""))
    url = (part.get("audio_url") or {}).get("url", "")
    if not url.startswith("data:") or ";base64," not in url:
        raise BadRequest("audio_url must be a base64 data URI")
    return _audio_from_data(url.split(";base64,", 1)[1])


def parse_chat(body: dict[str, Any]) -> ChatInput:
    """The decoded inputs of a chat completion request."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    texts: list[str] = []
    system: list[str] = []
    audios: list[np.ndarray] = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        for part in parts:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                (system if message.get("role") == "system" else texts).append(part.get("text", ""))
            elif kind in ("input_audio", "audio_url"):
                audios.append(_audio_part(part))
            else:
                raise BadRequest(f"unsupported content part type {kind!r}")
    return ChatInput("\n".join(texts), "\n".join(system) or None, audios, float(body.get("temperature") or 0.0), body.get("max_tokens"))


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": len(text.split()), "total_tokens": len(text.split())},
    }


async def chat_completions(request: web.Request) -> web.Response:
    try:
        body = await request.json()
        chat = parse_chat(body)
    except ValueError:
        return _error(400, "request body is not valid JSON")
    except BadRequest as exc:
        return _error(400, str(exc))
    model = request.app[MODEL]
    text = await asyncio.get_running_loop().run_in_executor(request.app[POOL], model.generate, chat)
    return web.json_response(_completion(body.get("model") or model.name, text))


async def transcriptions(request: web.Request) -> web.Response:
    form = await request.post()
    upload = form.get("file")
    if not isinstance(upload, web.FileField):
        return _error(400, "multipart field 'file' is required")
    try:
        audio = decode(upload.file.read())
    except AudioError as exc:
        return _error(400, str(exc))
    language: Optional[str] = form.get("language") or None  # type: ignore[assignment]
    temperature = float(form.get("temperature") or 0.0)  # type: ignore[arg-type]
    model = request.app[MODEL]
    text = await asyncio.get_running_loop().run_in_executor(request.app[POOL], model.transcribe, audio, language, temperature)
    return web.json_response({"text": text})


async def list_models(request: web.Request) -> web.Response:
    name = request.app[MODEL].name
    return web.json_response({"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "local"}]})


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def load_model(spec: str) -> AudioModel:
    """An AudioModel from a built-in name or 'module:Class'."""
    module_name, _, class_name = BUILTIN.get(spec, spec).partition(":")
    model = getattr(importlib.import_module(module_name), class_name)()
    if not isinstance(model, AudioModel):
        raise SystemExit(f"{spec} is not an AudioModel subclass")
    return model


def make_app(model: AudioModel) -> web.Application:
    """The aiohttp application serving `model` (already loaded)."""
    app = web.Application(client_max_size=256 * 1024 * 1024)
    app[MODEL] = model
    app[POOL] = ThreadPoolExecutor(max_workers=max(1, model.concurrency))
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/audio/transcriptions", transcriptions)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/health", health)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve an AudioModel behind an OpenAI-compatible API.")
    parser.add_argument("--model", default="pocketsphinx", help="built-in name (pocketsphinx) or module:Class")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    args = parser.parse_args()
    model = load_model(args.model)
    model.load()
    web.run_app(make_app(model), host=args.host, port=args.port, print=lambda *_: print(f"serving {model.name} on http://{args.host}:{args.port}/v1", flush=True))


if __name__ == "__main__":
    main()
