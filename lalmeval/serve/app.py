"""The aiohttp application: OpenAI-compatible routes over one model, its batcher and its runner."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from aiohttp import web

from lalmeval.serve.auth import require_key
from lalmeval.serve.batcher import Batcher
from lalmeval.serve.chat import chat_options, chunks, completion, parse_chat
from lalmeval.serve.errors import ApiError, BadRequest, Unsupported, json_errors
from lalmeval.serve.model import AudioModel, Reply
from lalmeval.serve.runtime import CHAT, SPEECH, TRANSCRIPTION, Runner
from lalmeval.serve.speech import chat_answer, speech_answer, speech_input, spoken
from lalmeval.serve.transcription import read_form, render, transcription_input


@dataclass(frozen=True)
class Limits:
    """How much the server takes on: request size, batch size and wait, waiting requests."""

    max_body_mb: int = 256
    max_batch: int = 0          # 0: the model's own max_batch_size
    max_wait_ms: float = 10.0
    max_queue: int = 256
    max_audio_seconds: float = 3600.0  # of all the clips of one request, checked from their headers before decoding
    api_key: Optional[str] = field(default=None, repr=False)  # required of every request but /health when set


@dataclass
class Served:
    """What the handlers need: the model, the ids it answers to, the batcher."""

    model: AudioModel
    ids: tuple[str, ...]
    batcher: Batcher
    runner: Runner
    max_body: int
    max_audio_seconds: float


SERVED = web.AppKey("served", Served)


def _check_model(served: Served, body_model: Any) -> str:
    """The id to answer with: the one asked for when it is served (or none was given), else a 404."""
    if body_model is None or body_model == "":
        return served.ids[0]
    if body_model not in served.ids:
        raise ApiError(404, f"model {body_model!r} does not exist here (served: {', '.join(served.ids)})", "model", code="model_not_found")
    return body_model


async def _json_body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    try:  # megabytes of base64 audio: parsed off the event loop
        body = await asyncio.get_running_loop().run_in_executor(None, json.loads, raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def _answered(results: list[Any]) -> list[Reply]:
    """The replies, or the refusal the model gave one of them."""
    for result in results:
        if isinstance(result, ApiError):
            raise result
    return results


async def chat_completions(request: web.Request) -> web.StreamResponse:
    served = request.app[SERVED]
    body = await _json_body(request)
    name = _check_model(served, body.get("model"))
    options = chat_options(body)
    speak = spoken(body, served.model, name, options.stream)   # modalities audio: the voice and format, else None
    chat = await asyncio.get_running_loop().run_in_executor(None, parse_chat, body, served.max_audio_seconds)  # decoding stays off the event loop
    chat = replace(chat, voice=speak.voice) if speak is not None else chat
    if chat.images and not served.model.takes_images:
        raise Unsupported(f"model {name} does not take images (its class does not set takes_images = True)", "messages")
    if not chat.audios and served.model.needs_audio:
        raise Unsupported(f"model {name} answers audio only: this request has no input_audio or audio_url part", "messages")
    replies = _answered(await served.batcher.submit(CHAT, [chat] * options.n))
    if speak is not None:
        return await chat_answer(request, name, replies, speak, options)
    if not options.stream:
        return web.json_response(completion(name, replies), dumps=lambda o: json.dumps(o, ensure_ascii=False))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for chunk in chunks(name, replies, options.include_usage):
        await response.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def _audio(request: web.Request, task: str) -> web.Response:
    served = request.app[SERVED]
    form = await read_form(request, served.max_body)
    name = _check_model(served, form.get("model"))
    item, response_format = await asyncio.get_running_loop().run_in_executor(None, transcription_input, form, task, served.model, name,
                                                                            served.max_audio_seconds)
    (reply,) = _answered(await served.batcher.submit(TRANSCRIPTION, [item]))
    return render(reply, item, response_format)


async def speech(request: web.Request) -> web.Response:
    served = request.app[SERVED]
    body = await _json_body(request)
    name = _check_model(served, body.get("model"))
    item, response_format = speech_input(body, served.model, name)
    (reply,) = _answered(await served.batcher.submit(SPEECH, [item]))
    return await speech_answer(reply, response_format)


async def transcriptions(request: web.Request) -> web.Response:
    return await _audio(request, "transcribe")


async def translations(request: web.Request) -> web.Response:
    return await _audio(request, "translate")


def _card(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "lalmeval"}


async def list_models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [_card(i) for i in request.app[SERVED].ids]})


async def get_model(request: web.Request) -> web.Response:
    model_id = request.match_info["model_id"]
    served = request.app[SERVED]
    if model_id not in served.ids:
        raise ApiError(404, f"model {model_id!r} does not exist here (served: {', '.join(served.ids)})", "model", code="model_not_found")
    return web.json_response(_card(model_id))


async def health(request: web.Request) -> web.Response:
    """ok: every worker takes requests; degraded: some are being replaced; restarting (503): none can answer now."""
    served = request.app[SERVED]
    batcher, runner = served.batcher, served.runner
    ready = runner.ready_workers
    status = "ok" if ready == runner.workers else "degraded" if ready else "restarting"
    return web.json_response({"status": status, "workers": runner.workers, "workers_ready": ready, "workers_replaced": runner.replaced,
                              "running": batcher.running, "waiting": batcher.waiting, "batches": batcher.batches,
                              "batched_requests": batcher.batched}, status=503 if status == "restarting" else 200)


def make_app(runner: Runner, ids: tuple[str, ...], limits: Limits = Limits()) -> web.Application:
    """The application serving the (loaded) model of `runner` under `ids`."""
    model = runner.model
    max_body = limits.max_body_mb * 1024 * 1024
    batcher = Batcher(runner.run, runner.wait_ready, limits.max_batch or model.max_batch_size, limits.max_wait_ms / 1000,
                      limits.max_queue, runner.workers)
    # a refused key is an error object too; no error message repeats the key, wherever the client put it
    middlewares = [json_errors(limits.api_key)] + ([require_key(limits.api_key)] if limits.api_key else [])
    app = web.Application(client_max_size=max_body, middlewares=middlewares)
    app[SERVED] = Served(model, ids, batcher, runner, max_body, limits.max_audio_seconds)

    async def lifecycle(app: web.Application):
        runner.start()
        batcher.start()
        yield
        runner.close(abandon=await batcher.stop())

    async def stopping(app: web.Application) -> None:  # SIGINT/SIGTERM: the port is closed, open requests are answered
        batcher.refuse_all(ApiError(503, "server is shutting down"))

    app.cleanup_ctx.append(lifecycle)
    app.on_shutdown.append(stopping)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/audio/transcriptions", transcriptions)
    app.router.add_post("/v1/audio/translations", translations)
    app.router.add_post("/v1/audio/speech", speech)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/v1/models/{model_id:.+}", get_model)
    app.router.add_get("/health", health)
    return app
