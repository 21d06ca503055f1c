"""Request bodies and reply parsing per inference_type (chat completions, transcriptions)."""

from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

from lalmeval.config.generation import request_fields
from lalmeval.config.schema import ModelInfo
from lalmeval.data.messages import Audio, Conversation, Text, to_openai_messages
from lalmeval.media.audio import PreparedAudio
from lalmeval.media.images import ImagePart
from lalmeval.registry import Registry
from lalmeval.results.records import Prompt
from lalmeval.text import printable

_AUDIO_SLOT = "@@lalmeval-audio-{}@@"


class ReplyError(Exception):
    """A 200 reply that holds no usable text; the message says what was wrong with its shape."""


class RequestError(Exception):
    """A sample that cannot become a request of this inference type (recorded as 'request: ...')."""


@dataclass(frozen=True)
class SpokenAudio:
    """The audio of a spoken reply as it came: base64 text (one piece, or a stream's pieces) or the raw file."""

    data: Union[str, tuple[str, ...], bytes]
    format: Optional[str] = None     # the format the reply declares, when it does


@dataclass(frozen=True)
class Answer:
    """What a reply carries: the text, the token usage when the server reports it, and the audio of a spoken reply."""

    text: str
    usage: Optional[dict[str, int]] = None
    audio: Optional[SpokenAudio] = None


def kind(value: Any) -> str:
    """The JSON name of a value's type, for messages about wrong-shaped replies."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "list", dict: "object"}.get(type(value), type(value).__name__)


def a_kind(value: Any) -> str:
    """'null', 'a number', 'an object', ...: the type of a value as a phrase."""
    name = kind(value)
    return name if name == "null" else ("an " if name[0] in "aeiou" else "a ") + name


def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise ReplyError(f"{where} is {a_kind(value)}, not an object")
    return value


def usage_of(payload: dict) -> Optional[dict[str, int]]:
    """prompt/completion/total token counts, when the reply reports them as numbers; the counts of
    prompt_tokens_details and completion_tokens_details (audio, cached, reasoning) as prompt_audio_tokens, …"""
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        return None
    counts = dict(_token_counts(usage, "", "usage."))
    for side in ("prompt", "completion"):
        details = usage.get(f"{side}_tokens_details")
        if isinstance(details, dict):
            counts.update(_token_counts(details, f"{side}_", f"usage.{side}_tokens_details."))
    return counts or None


# A token count past what a JSON number holds exactly is no count (the model server refuses the same).
MAX_TOKEN_COUNT = 2**53


def _token_counts(counts: dict, prefix: str, where: str) -> list[tuple[str, int]]:
    """The `*_tokens` numbers of a usage object (named `prefix` + key); a count that is no count fails the reply,
    never the sum, and its reason names the field where the reply has it (`where` + key)."""
    found = []
    for key, value in counts.items():
        if not key.endswith("_tokens") or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        # JSON from a broken server may say Infinity, NaN or 1e400 (read as infinity), 1e300, 2.5 or a negative count:
        # each would be summed into the run's tokens, its cost and its budget.
        if not math.isfinite(value) or value < 0 or value >= MAX_TOKEN_COUNT or value != int(value):
            raise ReplyError(f"{where}{printable(key)[:40]} is {value!r}, not a count of tokens")
        found.append((f"{prefix}{key}", int(value)))
    return found


class Protocol:
    """How one inference_type turns a prompt and audio into a request, and a reply into an Answer."""

    path = ""
    reads = "json"    # how the 200 body is read: json, or binary (the audio file itself)

    def body(self, info: ModelInfo, prompt: Prompt, audio: Sequence[PreparedAudio], params: dict[str, Any], language: str,
             images: Sequence[ImagePart] = ()) -> tuple[bytes, str]:
        raise NotImplementedError

    def parse(self, payload: Any) -> Answer:
        """The answer in a 200 reply; ReplyError when its shape is not the protocol's."""
        raise NotImplementedError

    def text(self, payload: Any) -> str:
        """Only the text of parse()."""
        return self.parse(payload).text


PROTOCOLS: Registry[Protocol] = Registry("inference type")


_SLOT = re.compile(rb"@@lalmeval-audio-(\d+)@@")


def splice(template: bytes, payloads: Sequence[bytes]) -> bytes:
    """The base64 payloads put in their slots, wherever and however often each appears: spliced in
    rather than JSON-encoded, as they are most of the bytes."""
    pieces = _SLOT.split(template)  # text, index, text, index, ..., text
    for at in range(1, len(pieces), 2):
        pieces[at] = payloads[int(pieces[at])]
    return b"".join(pieces)


def audio_part(audio_format: str) -> Callable[[Audio], dict[str, Any]]:
    """The JSON part of a clip, holding a slot that splice() fills with its base64 WAV."""
    def part(clip: Audio) -> dict[str, Any]:
        slot = _AUDIO_SLOT.format(clip.index)
        if audio_format == "audio_url":
            return {"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64," + slot}}
        return {"type": "input_audio", "input_audio": {"data": slot, "format": "wav"}}
    return part


class ChatCompletions(Protocol):
    """POST /chat/completions with the audio as an input_audio part or an audio_url data URI."""

    path = "/chat/completions"

    def body(self, info: ModelInfo, prompt: Prompt, audio: Sequence[PreparedAudio], params: dict[str, Any], language: str,
             images: Sequence[ImagePart] = ()) -> tuple[bytes, str]:
        conversation = prompt.conversation or Conversation.user([*([Text(prompt.text)] if prompt.text else []), *(Audio(i) for i in range(len(audio)))])
        messages = [{"role": "system", "content": prompt.system}] if prompt.system else []
        try:
            messages += to_openai_messages(Conversation(None, conversation.turns), images, audio_part(info.audio_format))
        except ValueError as exc:
            raise RequestError(str(exc)) from None
        template = json.dumps({"model": info.model, "messages": messages, **request_fields(params), **_reply_fields(info)}, ensure_ascii=False).encode()
        return splice(template, [clip.b64 for clip in audio]), "application/json"

    def parse(self, payload: Any) -> Answer:
        payload = _object(payload, "reply")
        if "choices" not in payload:
            error = payload.get("error")
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                error = error["message"]
            raise ReplyError(f"reply holds an error instead of choices: {error if isinstance(error, str) else json.dumps(error)}" if error else "reply has no 'choices'")
        choices = payload["choices"]
        if not isinstance(choices, list):
            raise ReplyError(f"'choices' is {a_kind(choices)}, not a list")
        if not choices:
            raise ReplyError("reply has empty 'choices'")
        choice = _object(choices[0], "choices[0]")
        if "message" not in choice and isinstance(choice.get("text"), str):  # completions-style servers
            return Answer(choice["text"], usage_of(payload))
        message = _object(choice.get("message"), "choices[0].message")
        audio = _spoken(message)
        if audio is not None and not message.get("content"):  # OpenAI puts a spoken reply's words in its transcript
            return Answer(message["audio"].get("transcript") or "", usage_of(payload), audio)
        return Answer(_content(message), usage_of(payload), audio)


def _reply_fields(info: ModelInfo) -> dict[str, Any]:
    """What the model entry asks of the reply's form: speech (modalities, audio) and streaming."""
    fields: dict[str, Any] = {}
    if "audio" in info.modalities:
        fields.update(modalities=list(info.modalities), audio={"voice": info.spoken.voice, "format": info.spoken.format})
    if info.stream:
        fields.update(stream=True, stream_options={"include_usage": True})
    return fields


def _spoken(message: dict) -> Optional[SpokenAudio]:
    """message.audio of a spoken reply, when it holds data."""
    audio = message.get("audio")
    if audio is None:
        return None
    audio = _object(audio, "choices[0].message.audio")
    data = audio.get("data")
    if isinstance(data, list) and all(isinstance(piece, str) for piece in data):
        data = tuple(data)
    elif not isinstance(data, str):
        raise ReplyError(f"message.audio.data is {a_kind(data)}, not base64 text")
    if "transcript" in audio and not isinstance(audio["transcript"], (str, type(None))):
        raise ReplyError(f"message.audio.transcript is {a_kind(audio['transcript'])}, not text")
    return SpokenAudio(data, audio.get("format") if isinstance(audio.get("format"), str) else None)


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        parts = [_object(part, "a content part") for part in content]
        texts = [part.get("text") for part in parts if part.get("type", "text") in ("text", "output_text")]
        if any(not isinstance(t, str) for t in texts):
            raise ReplyError("a text content part has no string 'text'")
        content = "".join(texts) if texts else None
    if content is None:
        # Reasoning models may put everything in a side field; a refusal is an answer too.
        for side in ("reasoning_content", "reasoning", "refusal"):
            if isinstance(message.get(side), str) and message[side]:
                return message[side]
        raise ReplyError("reply content is null")
    if not isinstance(content, str):
        raise ReplyError(f"reply content is {a_kind(content)}, not text")
    return content  # an empty string is a real, empty answer


class Transcriptions(Protocol):
    """POST /audio/transcriptions as multipart form data (file, model, language, temperature, and the runspec's
    transcription_prompt when it gives one: never the instruction, which Whisper would read as preceding text)."""

    path = "/audio/transcriptions"

    def body(self, info: ModelInfo, prompt: Prompt, audio: Sequence[PreparedAudio], params: dict[str, Any], language: str,
             images: Sequence[ImagePart] = ()) -> tuple[bytes, str]:
        if images or prompt.conversation is not None:
            raise RequestError("transcription endpoints take one clip and a prompt; this sample has images or a message list")
        if len(audio) != 1:
            raise RequestError(f"transcription endpoints take exactly one clip; this sample has {len(audio)}")
        boundary = uuid.uuid4().hex
        fields = {"model": info.model, "language": language, "temperature": str(params.get("temperature", 0.0))}
        if isinstance(params.get("prompt"), str):
            fields["prompt"] = params["prompt"]
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
            for name, value in fields.items()
        ]
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="audio.wav"\r\nContent-Type: audio/wav\r\n\r\n'.encode())
        parts.extend((audio[0].wav, f"\r\n--{boundary}--\r\n".encode()))
        return b"".join(parts), f"multipart/form-data; boundary={boundary}"

    def parse(self, payload: Any) -> Answer:
        payload = _object(payload, "reply")
        if "text" not in payload:
            raise ReplyError("reply has no 'text'")
        if not isinstance(payload["text"], str):
            raise ReplyError(f"reply 'text' is {a_kind(payload['text'])}, not text")
        return Answer(payload["text"], usage_of(payload))


class Speech(Protocol):
    """POST /audio/speech (text to speech): the prompt's text as input, the model entry's audio voice and format."""

    path = "/audio/speech"
    reads = "binary"

    def body(self, info: ModelInfo, prompt: Prompt, audio: Sequence[PreparedAudio], params: dict[str, Any], language: str,
             images: Sequence[ImagePart] = ()) -> tuple[bytes, str]:
        if audio or images or prompt.conversation is not None:
            raise RequestError("a speech endpoint takes text only; this sample sends audio, images or a message list")
        if not prompt.text.strip():
            raise RequestError("nothing to say: the sample's text is empty")
        # /audio/speech names raw 24 kHz samples 'pcm', chat's audio 'pcm16': one key serves both.
        audio_format = "pcm" if info.spoken.format == "pcm16" else info.spoken.format
        body = {"model": info.model, "input": prompt.text, "voice": info.spoken.voice, "response_format": audio_format}
        return json.dumps(body, ensure_ascii=False).encode(), "application/json"

    def parse(self, payload: Any) -> Answer:
        if not isinstance(payload, bytes) or not payload:
            raise ReplyError("the speech reply is empty")
        if payload[:1] == b"{" and b'"error"' in payload[:200]:
            raise ReplyError(f"reply holds an error instead of audio: {payload[:200].decode('utf-8', 'replace')}")
        return Answer("", None, SpokenAudio(payload))


PROTOCOLS.register("openai")(ChatCompletions())
PROTOCOLS.register("vllm")(ChatCompletions())
PROTOCOLS.register("transcription")(Transcriptions())
PROTOCOLS.register("speech")(Speech())
