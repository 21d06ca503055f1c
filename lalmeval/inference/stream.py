"""A streamed chat reply (server-sent events) assembled into one completion, with when its first token and audio came."""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any, Optional

# One `data:` line per event; the body is read whole (with when each piece of it arrived) and split once here,
# so a reply of hundreds of deltas costs one regex pass and one json.loads, not a Python loop per network read.
_DATA = re.compile(rb"^data:[ \t]?(.*?)\r?$", re.M)
Marks = list[tuple[int, float]]   # (bytes received so far, perf_counter when they had arrived), one per network read


@dataclass(frozen=True)
class Assembled:
    """A streamed reply as the completion it adds up to, and the arrival times of its first text and first audio."""

    payload: dict[str, Any]
    first_token: Optional[float]
    first_audio: Optional[float]
    deltas: int                 # content (or transcript) deltas: a token count when the server reports no usage


def _arrival(marks: Marks, end: int) -> float:
    """When the byte at offset `end - 1` had arrived."""
    return marks[min(bisect.bisect_left(marks, (end, float("-inf"))), len(marks) - 1)][1]


def _events(raw: bytes) -> tuple[list[Any], list[int]]:
    """The JSON events of an SSE body (without [DONE]) and the offset at which each ends."""
    found = [(m.group(1), m.end()) for m in _DATA.finditer(raw)]
    kept = [(data, end) for data, end in found if data.strip() and data.strip() != b"[DONE]"]
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


def assemble(raw: bytes, marks: Marks) -> Assembled:
    """The completion a stream of chat.completion.chunk events adds up to (the first choice); ValueError on a body that is not SSE JSON."""
    events, ends = _events(raw)
    if not events:
        raise ValueError("the streamed reply holds no events")
    text: list[str] = []
    transcript: list[str] = []
    audio: list[str] = []
    reasoning: list[str] = []
    first_token = first_audio = None
    finish, usage, deltas = None, None, 0
    for event, end in zip(events, ends):
        if not isinstance(event, dict):
            raise ValueError(f"a streamed event is {type(event).__name__}, not an object")
        if "error" in event and "choices" not in event:
            return Assembled(event, None, None, 0)   # the server's error, read as a non-streamed one would be
        usage = event.get("usage") or usage
        choice = next((c for c in event.get("choices") or () if isinstance(c, dict) and c.get("index", 0) == 0), None)
        delta = choice.get("delta") if choice else None
        if not isinstance(delta, dict):
            continue
        finish = choice.get("finish_reason") or finish
        said = delta.get("audio") if isinstance(delta.get("audio"), dict) else {}
        words = [w for w in (delta.get("content"), said.get("transcript")) if isinstance(w, str) and w]
        if words:
            text.extend(w for w in [delta.get("content")] if isinstance(w, str))
            transcript.extend(w for w in [said.get("transcript")] if isinstance(w, str))
            deltas += 1
            first_token = first_token if first_token is not None else _arrival(marks, end)
        elif isinstance(delta.get("content"), str):
            text.append(delta["content"])
        for side in ("reasoning_content", "reasoning"):
            if isinstance(delta.get(side), str):
                reasoning.append(delta[side])
        if isinstance(said.get("data"), str) and said["data"]:
            audio.append(said["data"])
            first_audio = first_audio if first_audio is not None else _arrival(marks, end)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text else None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if audio or transcript:
        # The pieces stay apart: each is base64 of its own, and one may end in padding.
        message["audio"] = {"data": audio, "transcript": "".join(transcript), "format": "pcm16"}
    payload = {"choices": [{"index": 0, "message": message, "finish_reason": finish}], **({"usage": usage} if usage else {})}
    return Assembled(payload, first_token, first_audio, deltas)
