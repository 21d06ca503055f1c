"""Spoken replies: POST /v1/audio/speech, and chat answers with `modalities: ["text", "audio"]` (OpenAI's shapes)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator, Optional

import numpy as np
import soundfile as sf
import soxr
from aiohttp import web

from lalmeval.media.audio import to_pcm16, wav_bytes
from lalmeval.serve.chat import ChatOptions, completion, usage
from lalmeval.serve.errors import BadRequest, Unsupported
from lalmeval.serve.model import AudioModel, Reply, Speech, SpeechInput

PCM_RATE = 24000          # OpenAI's raw pcm / pcm16: 16-bit little-endian mono at 24 kHz, no header
MAX_INPUT = 4096          # characters of text one /audio/speech request may ask for (OpenAI's limit)
STREAM_CHUNK = 9600       # bytes of pcm16 per streamed audio delta: 0.2 s
EXPIRES = 3600            # seconds an audio id is said to stay valid (nothing is kept here: the data travels in the reply)
# libsndfile's containers for the formats OpenAI names; aac has none here and is refused with the ones that work.
_CONTAINERS = {"wav": ("WAV", "PCM_16", "audio/wav"), "flac": ("FLAC", "PCM_16", "audio/flac"),
               "mp3": ("MP3", "MPEG_LAYER_III", "audio/mpeg"), "opus": ("OGG", "OPUS", "audio/ogg")}
SPEECH_FORMATS = (*_CONTAINERS, "pcm")
CHAT_FORMATS = (*_CONTAINERS, "pcm16")


@dataclass(frozen=True)
class Spoken:
    """A chat request's ask for a spoken reply: the voice, and the audio format of message.audio.data."""

    voice: str
    format: str


def _pcm(speech: Speech) -> bytes:
    samples = speech.samples if speech.rate == PCM_RATE else soxr.resample(speech.samples, speech.rate, PCM_RATE)
    return to_pcm16(np.asarray(samples, dtype=np.float32)).tobytes()


def encode(speech: Speech, audio_format: str) -> tuple[bytes, str]:
    """The speech as a file of `audio_format`, with its media type (CPU work: call off the loop)."""
    if audio_format in ("pcm", "pcm16"):
        return _pcm(speech), "audio/pcm"
    if audio_format == "wav":
        return bytes(wav_bytes(to_pcm16(speech.samples), speech.rate)), "audio/wav"
    container, subtype, mime = _CONTAINERS[audio_format]
    rate = 48000 if audio_format == "opus" else speech.rate   # Opus takes 8/12/16/24/48 kHz only
    samples = speech.samples if rate == speech.rate else soxr.resample(speech.samples, speech.rate, rate)
    out = io.BytesIO()
    sf.write(out, np.asarray(samples, dtype=np.float32), rate, format=container, subtype=subtype)
    return out.getvalue(), mime


def _voice(model: AudioModel, value: Any, param: str) -> str:
    if value is None:
        return model.voices[0]
    if not isinstance(value, str) or value not in model.voices:
        raise BadRequest(f"'{param}' must be one of the voices of this model: {', '.join(model.voices)}", param)
    return value


def _speaker(model: AudioModel, name: str) -> None:
    if not model.voices:
        raise Unsupported(f"model {name} does not speak (its class lists no voices): ask for text only", "modalities")


def speech_input(body: dict[str, Any], model: AudioModel, name: str) -> tuple[SpeechInput, str]:
    """The text, voice and speed of a /v1/audio/speech request, and its response_format (OpenAI's default: mp3)."""
    _speaker(model, name)
    text = body.get("input")
    if not isinstance(text, str) or not text.strip():
        raise BadRequest("'input' must be the non-empty text to say", "input")
    if len(text) > MAX_INPUT:
        raise BadRequest(f"'input' is {len(text)} characters; at most {MAX_INPUT}", "input")
    audio_format = body.get("response_format", "mp3")
    if audio_format not in SPEECH_FORMATS:
        raise BadRequest(f"'response_format' must be one of {', '.join(SPEECH_FORMATS)}", "response_format")
    speed = body.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0.25 <= speed <= 4.0:
        raise BadRequest("'speed' must be a number from 0.25 to 4.0", "speed")
    return SpeechInput(text, _voice(model, body.get("voice"), "voice"), float(speed)), audio_format


def spoken(body: dict[str, Any], model: AudioModel, name: str, stream: bool) -> Optional[Spoken]:
    """What a chat request's `modalities` and `audio` ask for: None for text only, else the voice and format."""
    modalities = body.get("modalities")
    if modalities is None:
        return None
    if not isinstance(modalities, list) or not modalities or any(m not in ("text", "audio") for m in modalities):
        raise BadRequest("'modalities' must be a list of \"text\" and \"audio\"", "modalities")
    if "audio" not in modalities:
        return None
    _speaker(model, name)
    audio = body.get("audio")
    if not isinstance(audio, dict) or not isinstance(audio.get("format"), str):
        raise BadRequest("modalities audio needs 'audio': {\"voice\": ..., \"format\": ...}", "audio")
    if audio["format"] not in CHAT_FORMATS:
        raise BadRequest(f"'audio.format' must be one of {', '.join(CHAT_FORMATS)}", "audio.format")
    if stream and audio["format"] != "pcm16":
        raise BadRequest("a streamed spoken reply comes as pcm16 deltas: set audio.format to pcm16", "audio.format")
    return Spoken(_voice(model, audio.get("voice"), "audio.voice"), audio["format"])


def _audio_id() -> str:
    return f"audio_{uuid.uuid4().hex[:24]}"


def audio_message(reply: Reply, audio_format: str) -> dict[str, Any]:
    """message.audio of a spoken reply: its id, base64 data, transcript and expiry (CPU work: encoding)."""
    if reply.speech is None:
        raise RuntimeError("the model answered a spoken request without speech")
    data, _ = encode(reply.speech, audio_format)
    return {"id": _audio_id(), "data": base64.b64encode(data).decode("ascii"), "expires_at": int(time.time()) + EXPIRES,
            "transcript": reply.text}


def spoken_completion(completion: dict[str, Any], replies: list[Reply], audio_format: str) -> dict[str, Any]:
    """The chat.completion with each choice's spoken reply: content null, the words in audio.transcript (as OpenAI answers)."""
    for choice, reply in zip(completion["choices"], replies):
        choice["message"] = {"role": "assistant", "content": None, "refusal": None, "audio": audio_message(reply, audio_format)}
    return completion


def spoken_chunks(head: dict[str, Any], replies: list[Reply], include_usage: bool, usage: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed spoken answer as OpenAI sends them: audio.transcript deltas, then pcm16 audio.data deltas."""
    extra = {"usage": None} if include_usage else {}

    def chunk(i: int, delta: dict[str, Any], finish: Optional[str] = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": i, "delta": delta, "logprobs": None, "finish_reason": finish}], **extra}

    for i, reply in enumerate(replies):
        audio_id = _audio_id()
        yield chunk(i, {"role": "assistant", "content": None, "refusal": None, "audio": {"id": audio_id, "transcript": ""}})
        pcm = _pcm(reply.speech) if reply.speech is not None else b""
        for delta in interleaved(_words(reply.text), [pcm[at:at + STREAM_CHUNK] for at in range(0, len(pcm), STREAM_CHUNK)]):
            yield chunk(i, {"audio": delta})
        yield chunk(i, {"audio": {"id": audio_id, "expires_at": int(time.time()) + EXPIRES}})
        yield chunk(i, {}, reply.finish_reason)
    if include_usage:
        yield {**head, "choices": [], "usage": usage}


def interleaved(words: list[str], pieces: list[bytes]) -> Iterator[dict[str, Any]]:
    """Transcript and audio deltas side by side, as OpenAI streams them: each audio piece after the words said by its end."""
    said = 0
    for index, piece in enumerate(pieces):
        upto = len(words) * (index + 1) // len(pieces)
        for word in words[said:upto]:
            yield {"transcript": word}
        said = upto
        yield {"data": base64.b64encode(piece).decode("ascii")}
    for word in words[said:]:
        yield {"transcript": word}


def _words(text: str) -> list[str]:
    """The transcript in word-sized deltas that join back to it exactly."""
    pieces, start = [], 0
    for at in range(1, len(text)):
        if text[at] == " " and text[at - 1] != " ":
            pieces.append(text[start:at])
            start = at
    return [*pieces, text[start:]] if text else []


async def chat_answer(request: web.Request, name: str, replies: list[Reply], speak: Spoken, options: ChatOptions) -> web.StreamResponse:
    """The answer to a chat request that asked for speech: one completion, or its SSE chunks."""
    loop = asyncio.get_running_loop()
    if not options.stream:  # encoding and base64 of seconds of audio: off the event loop
        body = await loop.run_in_executor(None, lambda: json.dumps(spoken_completion(completion(name, replies), replies, speak.format)))
        return web.Response(body=body.encode(), content_type="application/json")
    head = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion.chunk", "created": int(time.time()), "model": name}
    events = await loop.run_in_executor(None, lambda: [f"data: {json.dumps(c)}\n\n".encode()
                                                       for c in spoken_chunks(head, replies, options.include_usage, usage(replies))])
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for event in events:
        await response.write(event)
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def speech_answer(reply: Reply, audio_format: str) -> web.Response:
    """The body of a /v1/audio/speech reply: the audio file itself."""
    if reply.speech is None:
        raise RuntimeError("the model answered a speech request without speech")
    data, mime = await asyncio.get_running_loop().run_in_executor(None, encode, reply.speech, audio_format)
    return web.Response(body=data, content_type=mime)
