"""POST /v1/audio/transcriptions and /translations: the multipart form, and the five reply formats."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from aiohttp import BodyPartReader, web

from lalmeval.errors import UserError
from lalmeval.config.languages import NAMES, iso_code
from lalmeval.serve.chat import AudioBudget
from lalmeval.serve.errors import BadRequest, Unsupported
from lalmeval.serve.model import AudioModel, Reply, Segment, TranscriptionInput

FORMATS = ("json", "text", "srt", "verbose_json", "vtt")


@dataclass(frozen=True)
class Form:
    """The fields of a transcription form: the file's bytes and the text fields as sent."""

    audio: bytes
    fields: dict[str, list[str]]

    def get(self, key: str) -> Optional[str]:
        values = self.fields.get(key)
        return values[-1] if values else None


async def read_form(request: web.Request, limit: int) -> Form:
    """The multipart body; anything malformed is a 400 saying what, a body over `limit` a 413."""
    if not request.content_type.startswith("multipart/"):
        raise BadRequest(f"expected a multipart/form-data body with a 'file' field, got {request.content_type or 'no content type'}")
    try:
        reader = await request.multipart()
        audio: Optional[bytes] = None
        fields: dict[str, list[str]] = {}
        size = 0
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                raise BadRequest("nested multipart bodies are not accepted")
            pieces = []
            while chunk := await part.read_chunk(1 << 16):  # counted as it arrives: an oversized file is never held whole
                size += len(chunk)
                if size > limit:
                    raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size)
                pieces.append(chunk)
            data = b"".join(pieces)
            if part.name == "file":
                audio = data
            elif part.name:
                fields.setdefault(part.name, []).append(data.decode("utf-8", errors="replace"))
    except (ValueError, AssertionError, UnicodeDecodeError, KeyError) as exc:  # aiohttp's parser on a broken body
        raise BadRequest(f"malformed multipart body: {exc or type(exc).__name__}") from None
    if audio is None:
        raise BadRequest("multipart field 'file' is required", "file")
    if not audio:
        raise BadRequest("'file' is empty (0 bytes)", "file")
    return Form(audio, fields)


def transcription_input(form: Form, task: str, model: AudioModel, name: str,
                        max_audio_seconds: Optional[float] = None) -> tuple[TranscriptionInput, str]:
    """The decoded clip (at most `max_audio_seconds` long) and settings (CPU work: decoding), and the reply format asked for."""
    if task == "translate" and not model.translates:
        raise Unsupported("this model does not translate (POST /v1/audio/transcriptions transcribes)")
    response_format = form.get("response_format") or "json"
    if response_format not in FORMATS:
        raise BadRequest(f"'response_format' must be one of {', '.join(FORMATS)}, not {response_format!r}", "response_format")
    granularities = form.fields.get("timestamp_granularities[]", []) + form.fields.get("timestamp_granularities", [])
    if "word" in granularities:
        raise Unsupported("word timestamps are not supported (segment timestamps are, with response_format verbose_json)", "timestamp_granularities")
    if (form.get("stream") or "").lower() == "true":
        raise Unsupported("streamed transcriptions are not supported; send stream=false", "stream")
    try:
        temperature = float(form.get("temperature") or 0.0)
    except ValueError:
        raise BadRequest("'temperature' must be a number", "temperature") from None
    if not 0.0 <= temperature <= 1.0:
        raise BadRequest("'temperature' must be from 0 to 1", "temperature")
    language = _language_code(form.get("language") or None, model, name)
    try:
        audio = AudioBudget(max_audio_seconds).decode(form.audio)
    except BadRequest as exc:
        raise BadRequest(exc.message, "file") from None
    timestamps = response_format in ("verbose_json", "srt", "vtt")
    return TranscriptionInput(audio, language if task == "transcribe" else None, form.get("prompt") or None, temperature, task, timestamps), response_format


def _language_code(language: Optional[str], model: AudioModel, name: str) -> Optional[str]:
    """'en', 'eng', 'en-US' or 'english' as 'en'; a malformed one is a 400, one the model lacks a 422."""
    if language is None:
        return None
    try:
        code = iso_code(language)
    except UserError:
        raise BadRequest(f"'language' must be an ISO-639-1 code such as 'en', not {language!r}", "language") from None
    if model.languages is not None and code not in model.languages:
        names = sorted(_language_name(c).title() for c in model.languages)
        known = " or ".join(names) if len(names) <= 4 else f"its {len(names)} languages"
        raise Unsupported(f"model {name} transcribes {known} only, not {language!r}", "language")
    return code


def _clock(seconds: float, separator: str) -> str:
    millis = int(round(max(0.0, seconds) * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def _cues(segments: tuple[Segment, ...]) -> list[Segment]:
    return [s for s in segments if s.text.strip()]


def srt(segments: tuple[Segment, ...]) -> str:
    """SubRip: numbered cues, comma before the milliseconds."""
    return "".join(f"{i}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{s.text.strip()}\n\n" for i, s in enumerate(_cues(segments), 1))


def vtt(segments: tuple[Segment, ...]) -> str:
    """WebVTT: a header, then cues with a dot before the milliseconds."""
    return "WEBVTT\n\n" + "".join(f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{s.text.strip()}\n\n" for s in _cues(segments))


def _language_name(code: Optional[str]) -> Optional[str]:
    if not code:
        return None
    names = {v: k for k, v in NAMES.items()}
    return names.get(code.lower(), code)


def verbose_json(reply: Reply, item: TranscriptionInput, duration: float) -> dict[str, Any]:
    """OpenAI's verbose_json: the text, the language, the duration and every segment with its numbers."""
    segments = [{"id": i, "seek": int(s.start * 100), "start": s.start, "end": s.end, "text": s.text, "tokens": list(s.tokens),
                 "temperature": item.temperature, "avg_logprob": s.avg_logprob, "compression_ratio": s.compression_ratio,
                 "no_speech_prob": s.no_speech_prob} for i, s in enumerate(reply.segments)]
    return {"task": item.task, "language": _language_name(reply.language or item.language or "en"), "duration": round(duration, 3),
            "text": reply.text, "segments": segments, "usage": {"type": "duration", "seconds": max(1, round(duration))}}


def render(reply: Reply, item: TranscriptionInput, response_format: str) -> web.Response:
    """The reply in the asked format (json and verbose_json as JSON; text, srt and vtt as plain text)."""
    duration = len(item.audio) / 16000
    if response_format == "text":
        return web.Response(text=reply.text + "\n", content_type="text/plain")
    if response_format == "srt":
        return web.Response(text=srt(reply.segments), content_type="text/plain")
    if response_format == "vtt":
        return web.Response(text=vtt(reply.segments), content_type="text/vtt")
    if response_format == "verbose_json":
        return web.json_response(verbose_json(reply, item, duration))
    tokens = {"type": "tokens", "input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens,
              "total_tokens": reply.prompt_tokens + reply.completion_tokens,
              "input_token_details": {"audio_tokens": reply.audio_tokens, "text_tokens": reply.prompt_tokens - reply.audio_tokens}}
    return web.json_response({"text": reply.text, "usage": tokens}, dumps=lambda o: json.dumps(o, ensure_ascii=False))
