"""Request bodies and reply parsing per inference_type (chat completions, transcriptions)."""

from __future__ import annotations

import json
import uuid
from typing import Any, Optional

from lalmeval.config import ModelInfo
from lalmeval.data.audio import PreparedAudio
from lalmeval.records import Prompt
from lalmeval.registry import Registry

_AUDIO_SLOT = "@@lalmeval-audio@@"


class ReplyError(Exception):
    """A 200 reply that holds no usable text."""


class Protocol:
    """How one inference_type turns a prompt and audio into a request, and a reply into text."""

    path = ""

    def body(self, info: ModelInfo, prompt: Prompt, audio: Optional[PreparedAudio], params: dict[str, Any], language: str) -> tuple[bytes, str]:
        raise NotImplementedError

    def text(self, payload: Any) -> str:
        raise NotImplementedError


PROTOCOLS: Registry[Protocol] = Registry("inference type")


class ChatCompletions(Protocol):
    """POST /chat/completions with the audio as an input_audio part or an audio_url data URI."""

    path = "/chat/completions"

    def body(self, info: ModelInfo, prompt: Prompt, audio: Optional[PreparedAudio], params: dict[str, Any], language: str) -> tuple[bytes, str]:
        content: list[dict[str, Any]] = []
        if prompt.text:
            content.append({"type": "text", "text": prompt.text})
        if audio is not None:
            if info.audio_format == "audio_url":
                content.append({"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64," + _AUDIO_SLOT}})
            else:
                content.append({"type": "input_audio", "input_audio": {"data": _AUDIO_SLOT, "format": "wav"}})
        messages = [{"role": "system", "content": prompt.system}] if prompt.system else []
        messages.append({"role": "user", "content": content})
        template = json.dumps({"model": info.model, "messages": messages, **params}, ensure_ascii=False).encode()
        if audio is None:
            return template, "application/json"
        # The base64 payload is spliced in rather than JSON-encoded: it is most of the bytes.
        head, tail = template.split(_AUDIO_SLOT.encode(), 1)
        return b"".join((head, audio.b64, tail)), "application/json"

    def text(self, payload: Any) -> str:
        try:
            choices = payload["choices"]
        except (TypeError, KeyError):
            raise ReplyError("reply has no 'choices'") from None
        if not choices:
            raise ReplyError("reply has empty 'choices'")
        message = choices[0].get("message") or {}
        content = message.get("content")
        if isinstance(content, list):  # some servers return content parts
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        if content is None:
            # Reasoning models may put everything in a side field; an empty string is a real answer.
            fallback = message.get("reasoning_content") or message.get("reasoning")
            if fallback:
                return fallback
            raise ReplyError("reply content is null")
        return content


class Transcriptions(Protocol):
    """POST /audio/transcriptions as multipart form data (file, model, language, temperature)."""

    path = "/audio/transcriptions"

    def body(self, info: ModelInfo, prompt: Prompt, audio: Optional[PreparedAudio], params: dict[str, Any], language: str) -> tuple[bytes, str]:
        if audio is None:
            raise ReplyError("transcription endpoints need audio; this sample has none")
        boundary = uuid.uuid4().hex
        fields = {"model": info.model, "language": language, "temperature": str(params.get("temperature", 0.0))}
        if prompt.text:
            fields["prompt"] = prompt.text
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
            for name, value in fields.items()
        ]
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="audio.wav"\r\nContent-Type: audio/wav\r\n\r\n'.encode())
        parts.extend((audio.wav, f"\r\n--{boundary}--\r\n".encode()))
        return b"".join(parts), f"multipart/form-data; boundary={boundary}"

    def text(self, payload: Any) -> str:
        if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
            raise ReplyError("reply has no 'text'")
        return payload["text"]


PROTOCOLS.register("openai")(ChatCompletions())
PROTOCOLS.register("vllm")(ChatCompletions())
PROTOCOLS.register("transcription")(Transcriptions())
