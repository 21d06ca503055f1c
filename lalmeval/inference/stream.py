"""A streamed chat reply (server-sent events) assembled into one completion, with when its first token and audio came."""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Any, Optional

Marks = list[tuple[int, float]]   # (bytes received so far, perf_counter when they had arrived), one per network read


@dataclass(frozen=True)
class Assembled:
    """A streamed reply as the completion it adds up to, and the arrival times of its first text and first audio."""

    payload: dict[str, Any]
    first_token: Optional[float]
    first_audio: Optional[float]
    deltas: int                 # content (or transcript) deltas: a token count when the server reports no usage


class Firsts:
    """Watches a stream's first pieces, as they arrive, for its first text (and, when `audio`, its first audio):
    once they are seen, nothing more needs timing and the rest of the body may be read in fewer, larger reads."""

    def __init__(self, audio: bool):
        self.want_audio = audio
        self.text = self.sound = False
        self._tail = b""

    @property
    def seen(self) -> bool:
        return self.text and (self.sound or not self.want_audio)

    def feed(self, chunk: bytes) -> None:
        """Read the complete events of `chunk` (with what was left of the one before) for text and audio deltas."""
        data = self._tail + chunk
        end = data.rfind(b"\n")
        self._tail = data[end + 1:]
        for line, _ in _data_lines(data[:end + 1]):
            try:
                event = json.loads(line)
            except ValueError:
                continue   # [DONE] or a broken event: assemble() says what is wrong with it
            choices = event.get("choices") if isinstance(event, dict) else None
            delta = choices[0].get("delta") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
            if not isinstance(delta, dict):
                continue
            said = delta.get("audio") if isinstance(delta.get("audio"), dict) else {}
            self.text = self.text or any(isinstance(w, str) and w for w in (delta.get("content"), said.get("transcript")))
            self.sound = self.sound or bool(said.get("data"))


def _arrival(marks: Marks, end: int) -> float:
    """When the byte at offset `end - 1` had arrived."""
    return marks[min(bisect.bisect_left(marks, (end, float("-inf"))), len(marks) - 1)][1]


def _data_lines(raw: bytes) -> list[tuple[bytes, int]]:
    """The payload of each `data:` line of an SSE body (without [DONE]) and the offset at which it ends.
    The body is split once in C: a line of base64 audio is never walked character by character."""
    kept, at = [], 0
    for line in raw.split(b"\n"):
        at += len(line) + 1
        if line.startswith(b"data:"):
            data = line[5:].strip()
            if data and data != b"[DONE]":
                kept.append((data, at - 1))
    return kept


def _events(raw: bytes) -> tuple[list[Any], list[int]]:
    """The JSON events of an SSE body, parsed in one json.loads, and the offset at which each ends."""
    kept = _data_lines(raw)
    if not kept:
        return [], []
    try:
        events = json.loads(b"[" + b",".join(data for data, _ in kept) + b"]")
    except ValueError:
        raise ValueError(f"a streamed event is not JSON: {next(d for d, _ in kept if not _is_json(d))[:120]!r}") from None
    return events, [end for _, end in kept]


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
        return True
    except ValueError:
        return False


def _first_choice(event: dict) -> Optional[dict]:
    choices = event.get("choices")
    if not choices or not isinstance(choices, list):
        return None
    choice = choices[0]   # servers send choice 0 first; another index is looked for only when it is not
    if isinstance(choice, dict) and choice.get("index", 0) == 0:
        return choice
    return next((c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0), None)


class _Parts:
    """The pieces of a streamed reply gathered event by event, and where its first text and audio ended."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.transcript: list[str] = []
        self.audio: list[str] = []
        self.reasoning: list[str] = []
        self.first_token: Optional[int] = None   # offsets in the body; dated by the marks at the end
        self.first_audio: Optional[int] = None
        self.deltas = 0

    def add(self, delta: dict, end: int) -> None:
        # One pass of plain lookups per event: this runs for every token of every streamed reply.
        content = delta.get("content")
        if isinstance(content, str):
            self.text.append(content)
            if content:
                self.deltas += 1
                if self.first_token is None:
                    self.first_token = end
        said = delta.get("audio")
        if isinstance(said, dict):
            words, data = said.get("transcript"), said.get("data")
            if isinstance(words, str) and words:
                self.transcript.append(words)
                if not content:
                    self.deltas += 1
                if self.first_token is None:
                    self.first_token = end
            if isinstance(data, str) and data:
                self.audio.append(data)
                if self.first_audio is None:
                    self.first_audio = end
        side = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(side, str):
            self.reasoning.append(side)

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) if self.text else None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.audio or self.transcript:
            # The pieces stay apart: each is base64 of its own, and one may end in padding.
            message["audio"] = {"data": self.audio, "transcript": "".join(self.transcript), "format": "pcm16"}
        return message


def assemble(raw: bytes, marks: Marks) -> Assembled:
    """The completion a stream of chat.completion.chunk events adds up to (the first choice); ValueError on a body that is not SSE JSON."""
    events, ends = _events(raw)
    if not events:
        raise ValueError("the streamed reply holds no events")
    parts = _Parts()
    finish, usage = None, None
    for event, end in zip(events, ends):
        if not isinstance(event, dict):
            raise ValueError(f"a streamed event is {type(event).__name__}, not an object")
        if "choices" not in event and "error" in event:
            return Assembled(event, None, None, 0)   # the server's error, read as a non-streamed one would be
        if event.get("usage"):
            usage = event["usage"]
        choice = _first_choice(event)
        if choice is None:
            continue
        delta = choice.get("delta")
        if choice.get("finish_reason"):
            finish = choice["finish_reason"]
        if isinstance(delta, dict):
            parts.add(delta, end)
    payload = {"choices": [{"index": 0, "message": parts.message(), "finish_reason": finish}], **({"usage": usage} if usage else {})}
    first_token = None if parts.first_token is None else _arrival(marks, parts.first_token)
    first_audio = None if parts.first_audio is None else _arrival(marks, parts.first_audio)
    return Assembled(payload, first_token, first_audio, parts.deltas)
