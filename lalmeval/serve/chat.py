"""POST /v1/chat/completions: decoding a request's parts, and the completion (or its SSE chunks)."""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator, Optional
from urllib.parse import urlsplit

import numpy as np

from lalmeval.media.audio import AudioError, ClipTooLong, decode
from lalmeval.media.images import ImageError, decode_data_uri, describe, sniff
from lalmeval.serve.errors import BadRequest
from lalmeval.serve.model import ChatInput, ImageInput, Part, Reply

MAX_CHOICES = 16
MAX_STOPS = 4


class AudioBudget:
    """The seconds of audio one request may still carry: each clip is decoded against what the earlier ones left."""

    def __init__(self, seconds: Optional[float]):
        self.limit, self.left = seconds, seconds

    def decode(self, raw: bytes) -> np.ndarray:
        """The clip at 16 kHz; a BadRequest, before decoding when the header tells, for one past the budget."""
        try:
            audio = decode(raw, max_seconds=self.left)
        except ClipTooLong as exc:
            raise BadRequest(too_long(self.limit or exc.limit, exc.how)) from None
        except AudioError as exc:
            raise BadRequest(str(exc)) from None
        if self.left is not None:
            self.left -= len(audio) / 16000
        return audio


def too_long(limit: float, how: str) -> str:
    """The 400's message for audio over --max-audio-seconds."""
    return f"audio longer than this server takes (--max-audio-seconds {limit:g}, all of a request's clips together): {how}"


def _audio_from_data(data: Any, budget: AudioBudget) -> np.ndarray:
    if not isinstance(data, str):
        raise BadRequest("audio data must be a base64 string")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("audio data is not valid base64") from None
    if not raw:
        raise BadRequest("audio data is empty")
    return budget.decode(raw)


def _audio_part(part: dict[str, Any], budget: AudioBudget) -> np.ndarray:
    if part.get("type") == "input_audio":
        body = part.get("input_audio")
        if not isinstance(body, dict):
            raise BadRequest("'input_audio' must be an object with base64 'data'")
        return _audio_from_data(body.get("data", ""), budget)
    body = part.get("audio_url")
    url = body.get("url", "") if isinstance(body, dict) else None
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise BadRequest("audio_url must be a base64 data URI")
    return _audio_from_data(url.split(";base64,", 1)[1], budget)


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


def _part(part: Any, where: str, budget: AudioBudget) -> Part:
    """One decoded content part: text, a clip or an image; BadRequest names the part."""
    kind = part.get("type") if isinstance(part, dict) else None
    try:
        if kind == "text":
            if not isinstance(part.get("text", ""), str):
                raise BadRequest("'text' must be a string")
            return part.get("text", "")
        if kind in ("input_audio", "audio_url"):
            return _audio_part(part, budget)
        if kind == "image_url":
            return _image_part(part)
    except BadRequest as exc:
        raise BadRequest(f"{where} ({kind}): {exc.message}", "messages") from None
    raise BadRequest(f"{where}: unsupported content part type {kind!r}", "messages")


def _number(body: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise BadRequest(f"'{key}' must be a number from {low:g} to {high:g}", key)
    return float(value)


def _count(body: dict[str, Any], *keys: str, high: int) -> Optional[int]:
    for key in keys:
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise BadRequest(f"'{key}' must be an integer from 1 to {high}", key)
        return value
    return None


def _stop(body: dict[str, Any]) -> tuple[str, ...]:
    """OpenAI's `stop`: a string or a list of up to 4 non-empty strings."""
    value = body.get("stop")
    stops = [] if value is None else [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or len(stops) > MAX_STOPS or not all(isinstance(s, str) and s for s in stops):
        raise BadRequest(f"'stop' must be a non-empty string or a list of up to {MAX_STOPS} of them", "stop")
    return tuple(stops)


def parse_chat(body: dict[str, Any], max_audio_seconds: Optional[float] = None) -> ChatInput:
    """The decoded inputs of a chat completion request (CPU work: base64 and audio decoding), its clips
    together at most `max_audio_seconds` long."""
    budget = AudioBudget(max_audio_seconds)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    system: list[str] = []
    parts: list[Part] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadRequest(f"messages[{i}] must be an object", "messages")
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise BadRequest(f"messages[{i}].content must be a string or a list of parts", "messages")
        items = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        decoded = [_part(part, f"messages[{i}].content[{j}]", budget) for j, part in enumerate(items)]
        is_system = message.get("role") in ("system", "developer")
        system.extend(p for p in decoded if is_system and isinstance(p, str))
        parts.extend(p for p in decoded if not (is_system and isinstance(p, str)))
    return ChatInput(
        "\n".join(p for p in parts if isinstance(p, str)), "\n".join(system) or None,
        [p for p in parts if isinstance(p, np.ndarray)], _number(body, "temperature", 0.0, 0.0, 2.0),
        _count(body, "max_completion_tokens", "max_tokens", high=1_000_000),
        images=[p for p in parts if isinstance(p, ImageInput)], parts=parts, stop=_stop(body),
    )


@dataclass(frozen=True)
class ChatOptions:
    """The settings of a chat request that shape the answer's form, not the model's input."""

    n: int
    stream: bool
    include_usage: bool


def chat_options(body: dict[str, Any]) -> ChatOptions:
    """n, stream and stream_options, checked."""
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise BadRequest("'stream' must be true or false", "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequest("'stream_options' must be an object", "stream_options")
    return ChatOptions(_count(body, "n", high=MAX_CHOICES) or 1, bool(stream), bool((options or {}).get("include_usage")))


def usage(replies: list[Reply]) -> dict[str, Any]:
    """Token counts of a request: the prompt counted once (every choice read the same input), completions summed."""
    prompt = replies[0].prompt_tokens
    completion = sum(r.completion_tokens for r in replies)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"audio_tokens": replies[0].audio_tokens, "cached_tokens": 0}}


def completion(model: str, replies: list[Reply]) -> dict[str, Any]:
    """The chat.completion object for the replies (one per choice)."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": i, "message": {"role": "assistant", "content": r.text}, "logprobs": None, "finish_reason": r.finish_reason}
                    for i, r in enumerate(replies)],
        "usage": usage(replies),
    }


def _pieces(reply: Reply) -> list[str]:
    """The reply in the order it was produced: segment by segment when the model gave segments that add up to it."""
    texts = [s.text for s in reply.segments]
    if not texts or "".join(texts).strip() != reply.text:
        return [reply.text]
    texts[0] = texts[0].lstrip()
    return texts


def chunks(model: str, replies: list[Reply], include_usage: bool) -> Iterator[dict[str, Any]]:
    """The chat.completion.chunk objects of a streamed answer: role, content pieces, finish reason, usage."""
    head = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    extra = {"usage": None} if include_usage else {}
    for i, reply in enumerate(replies):
        yield {**head, "choices": [{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}], **extra}
        for piece in _pieces(reply):
            if piece:
                yield {**head, "choices": [{"index": i, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}], **extra}
        yield {**head, "choices": [{"index": i, "delta": {}, "logprobs": None, "finish_reason": reply.finish_reason}], **extra}
    if include_usage:
        yield {**head, "choices": [], "usage": usage(replies)}
