"""OpenAI-compatible HTTP server around an AudioModel.

    python -m models.inference_boilerplate.server --model pocketsphinx --port 8011
    python -m models.inference_boilerplate.server --model my_package.my_module:MyModel
    python -m models.inference_boilerplate.server --model echo   # answers with what it received

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
from urllib.parse import urlsplit

import numpy as np
from aiohttp import web

from lalmeval.data.audio import AudioError, decode
from lalmeval.data.images import ImageError, decode_data_uri, describe, sniff
from models.inference_boilerplate.model import AudioModel, ChatInput, ImageInput, Part

BUILTIN = {
    "pocketsphinx": "models.inference_boilerplate.pocketsphinx_demo:PocketsphinxCommands",
    "echo": "models.inference_boilerplate.echo:EchoInputs",
}
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


def _image_part(part: dict[str, Any]) -> ImageInput:
    """A data: URI decoded to its bytes, or an http(s) URL handed on as it is (never fetched here)."""
    body = part.get("image_url")
    if not isinstance(body, dict) or not isinstance(body.get("url"), str):
        raise BadRequest("'image_url' must be an object with a string 'url'")
    url, detail = body["url"], body.get("detail")
    if detail is not None and not isinstance(detail, str):
        raise BadRequest("'detail' must be a string")
    if url[:8].lower().startswith(("http://", "https://")):
        if not urlsplit(url).netloc:
            raise BadRequest(f"malformed image URL {describe(url)}")
        return ImageInput(None, None, url, detail)
    if url[:5].lower() != "data:":
        raise BadRequest(f"url must be a data: URI or an http(s) URL, not {describe(url)}")
    try:
        mime, raw = decode_data_uri(url)
    except ImageError as exc:
        raise BadRequest(str(exc)) from None
    return ImageInput(raw, sniff(raw) or mime, None, detail)


def _part(part: Any, where: str) -> Part:
    """One decoded content part: text, a clip or an image; BadRequest names the part."""
    kind = part.get("type") if isinstance(part, dict) else None
    try:
        if kind == "text":
            if not isinstance(part.get("text", ""), str):
                raise BadRequest("'text' must be a string")
            return part.get("text", "")
        if kind in ("input_audio", "audio_url"):
            return _audio_part(part)
        if kind == "image_url":
            return _image_part(part)
    except BadRequest as exc:
        raise BadRequest(f"{where} ({kind}): {exc}") from None
    raise BadRequest(f"{where}: unsupported content part type {kind!r}")


def parse_chat(body: dict[str, Any]) -> ChatInput:
    """The decoded inputs of a chat completion request (CPU work: base64 and audio decoding)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    system: list[str] = []
    parts: list[Part] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadRequest(f"messages[{i}] must be an object")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise BadRequest(f"messages[{i}].content must be a string or a list of parts")
        items = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        decoded = [_part(part, f"messages[{i}].content[{j}]") for j, part in enumerate(items)]
        is_system = message.get("role") == "system"
        system.extend(p for p in decoded if is_system and isinstance(p, str))
        parts.extend(p for p in decoded if not (is_system and isinstance(p, str)))
    try:
        temperature = float(body.get("temperature") or 0.0)
    except (TypeError, ValueError):
        raise BadRequest("'temperature' must be a number") from None
    return ChatInput(
        "\n".join(p for p in parts if isinstance(p, str)), "\n".join(system) or None,
        [p for p in parts if isinstance(p, np.ndarray)], temperature, body.get("max_tokens"),
        images=[p for p in parts if isinstance(p, ImageInput)], parts=parts,
    )


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": len(text.split()), "total_tokens": len(text.split())},
    }


async def chat_completions(request: web.Request) -> web.Response:
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "request body is not valid JSON")
    if not isinstance(body, dict):
        return _error(400, "request body must be a JSON object")
    loop = asyncio.get_running_loop()
    try:
        chat = await loop.run_in_executor(None, parse_chat, body)  # decoding stays off the event loop
    except BadRequest as exc:
        return _error(400, str(exc))
    model = request.app[MODEL]
    if chat.images and not model.takes_images:
        return _error(400, f"model {model.name} does not take images (its class does not set takes_images = True)")
    text = await loop.run_in_executor(request.app[POOL], model.generate, chat)
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
    parser.add_argument("--model", default="pocketsphinx", help="built-in name (pocketsphinx, echo) or module:Class")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    args = parser.parse_args()
    model = load_model(args.model)
    model.load()
    web.run_app(make_app(model), host=args.host, port=args.port, print=lambda *_: print(f"serving {model.name} on http://{args.host}:{args.port}/v1", flush=True))


if __name__ == "__main__":
    main()
