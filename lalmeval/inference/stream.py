"""A streamed chat reply (server-sent events) assembled into one completion, with when its first token and audio came."""

from __future__ import annotations

import bisect
import json
import json.scanner
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

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
        if data.endswith(b"\n\n") and b"\r" not in data:
            cut = len(data)   # the usual read: whole events, found without a search through base64 audio
        else:
            cut = max((at + len(blank) for blank in (b"\n\n", b"\r\r", b"\r\n\r\n") if (at := data.rfind(blank)) >= 0), default=0)
        self._tail = data[cut:]   # an event not yet complete waits for the rest of it
        plain = _plain_events(data[:cut])
        for event in plain[0] if plain is not None else map(_loaded, _spec_events(data[:cut])[0]):
            choices = event.get("choices") if isinstance(event, dict) else None
            delta = choices[0].get("delta") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
            if not isinstance(delta, dict):
                continue
            said = delta.get("audio") if isinstance(delta.get("audio"), dict) else {}
            self.text = self.text or any(isinstance(w, str) and w for w in (delta.get("content"), said.get("transcript")))
            self.sound = self.sound or bool(said.get("data"))


def _loaded(data: bytes) -> Any:
    """An event's JSON, or None for [DONE] or a broken event (assemble() says what is wrong with it)."""
    try:
        return json.loads(data)
    except ValueError:
        return None


def _arrival(marks: Marks, end: int) -> float:
    """When the byte at offset `end - 1` had arrived."""
    return marks[min(bisect.bisect_left(marks, (end, float("-inf"))), len(marks) - 1)][1]


_LINE = re.compile(rb"([^\r\n]*)(?:\r\n|\r|\n)")


_scan = json.scanner.make_scanner(json.JSONDecoder())   # one JSON value from an offset: (value, where it ends)

SPLICE_MIN = 512   # an audio delta's base64 at least this long is taken as it stands, not scanned character by character


def _spliced(text: str, at: int, end: int) -> Any:
    """The event on `text[at:end]` (one line), read with its audio data's base64 taken as it stands: the JSON scanner
    reads a string character by character, at several times the cost of copying it, and base64 holds nothing a JSON
    string would escape. The event is scanned with that string left empty, and the string put back where the scanner
    put the empty one. Taken only on a line without a backslash (every key is then spelled as it reads, so the search
    finds every `"data"` key), for the line's only `"data"` key, under choices[0].delta.audio; else None. Then it gives
    what scanning the whole line gives, save one case: a raw control character in the string, which JSON forbids. A
    full scan refuses the reply as malformed (and it is retried); here a spoken reply's record refuses it when its
    audio is decoded (strict base64: not retried), and a reply whose audio is not kept is read as if it were valid."""
    key = text.find('"data"', at, end)
    if key < 0 or text.find("\\", at, end) >= 0:
        return None
    opened = text.find('"', key + 6, key + 9)
    if opened < 0 or text[key + 6:opened].strip() != ":":
        return None
    closed = text.find('"', opened + 1, end)
    if closed - opened <= SPLICE_MIN or text.find('"data"', closed, end) >= 0:
        return None
    short = text[at:opened + 1] + text[closed:end]
    try:
        event, stop = _scan(short, 0)
        said = event["choices"][0]["delta"]["audio"]
    except (StopIteration, ValueError, RecursionError, LookupError, TypeError):
        return None
    if stop != len(short) or type(said) is not dict or said.get("data") != "":
        return None
    said["data"] = text[opened + 1:closed]
    return event


def _plain_events(raw: bytes) -> Optional[tuple[list[Any], Callable[[int], int]]]:
    """The events of a body of the common shape (LF line ends, one `data: ` line per event, nothing else), read by
    the JSON scanner from one event straight to the next: no line is split, and an audio delta's base64 is sliced
    out, not scanned (_spliced). None for any other shape, or an event that is not one JSON value: `_spec_events` reads
    those."""
    if not raw.startswith(b"data: ") or not raw.endswith(b"\n\n") or b"\r" in raw:
        return None
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None
    events: list[Any] = []
    ends: list[int] = []
    at, last = 6, len(text) - 2
    scan, starts, find = _scan, text.startswith, text.find
    try:
        while True:
            if at == last - 6 and starts("[DONE]", at):
                break
            end = find("\n", at)   # the event's line: SSE ends its data there, so the value must end there too
            if end - at <= SPLICE_MIN or (event := _spliced(text, at, end)) is None:
                event, stop = scan(text, at)
                if stop != end:
                    return None   # a value spread over lines, or more than one value on the line
            events.append(event)
            ends.append(end)
            if end == last:
                break
            if not starts("\n\ndata: ", end):
                return None   # an event of more than one line, a comment, another field, CR line ends
            at = end + 8
    except (StopIteration, ValueError, RecursionError):
        return None
    if len(text) == len(raw):
        return events, ends.__getitem__
    return events, lambda index: len(text[:ends[index]].encode())   # offsets in bytes, where a character is several


def _spec_events(raw: bytes) -> tuple[list[bytes], list[int]]:
    """The data of each event as the SSE grammar reads it: CR, LF or CRLF line ends, `:` comments and other fields
    ignored, the `data:` lines of one event joined by newlines; an event ends at a blank line or at the body's end."""
    datas: list[bytes] = []
    ends: list[int] = []
    lines: list[bytes] = []
    last = 0   # where the current event's last `data:` line ends: its arrival is the event's

    def close(end: int) -> None:
        data = b"\n".join(lines)
        lines.clear()
        if data.strip() != b"[DONE]":
            datas.append(data)
            ends.append(end)

    for match in _LINE.finditer(raw if raw.endswith((b"\n", b"\r")) else raw + b"\n"):
        line = match.group(1)
        if not line:
            if lines:
                close(last)
        elif line.startswith(b"data:"):
            lines.append(line[6:] if line.startswith(b"data: ") else line[5:])
            last = match.end(1)
    if lines:
        close(last)
    return datas, ends


def _events(raw: bytes) -> tuple[list[Any], Callable[[int], int]]:
    """The JSON events of an SSE body, parsed in one json.loads, and where the i-th ends in the body."""
    plain = _plain_events(raw)
    if plain is not None:
        return plain
    datas, ends = _spec_events(raw)
    if not datas:
        return [], ends.__getitem__
    try:
        events = json.loads(b"[" + b",".join(datas) + b"]")
    except ValueError:
        events = []
    if len(events) != len(datas):   # not JSON, or an event of two values (`1,2`) that would shift the rest
        raise ValueError(f"a streamed event is not one JSON value: {next((d for d in datas if not _is_json(d)), datas[0])[:120]!r}")
    return events, ends.__getitem__


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


_TEXT_ONLY = frozenset(("content", "role"))   # a delta of text alone: read inline, without _Parts.add


class _Parts:
    """The pieces of a streamed reply gathered event by event, and where its first text and audio ended."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.transcript: list[str] = []
        self.audio: list[str] = []
        self.reasoning: list[str] = []
        self.first_token: Optional[int] = None   # indices of events; dated by the marks at the end
        self.first_audio: Optional[int] = None
        self.deltas = 0

    def add(self, delta: dict, index: int) -> None:
        # One pass of plain lookups per event: this runs for every token of every streamed reply.
        content = delta.get("content")
        if isinstance(content, str):
            self.text.append(content)
            if content:
                self.deltas += 1
                if self.first_token is None:
                    self.first_token = index
        said = delta.get("audio")
        if isinstance(said, dict):
            words, data = said.get("transcript"), said.get("data")
            if isinstance(words, str) and words:
                self.transcript.append(words)
                if not content:
                    self.deltas += 1
                if self.first_token is None:
                    self.first_token = index
            if isinstance(data, str) and data:
                self.audio.append(data)
                if self.first_audio is None:
                    self.first_audio = index
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


# The usual event of a written reply, as OpenAI, vLLM and most servers send it: one choice, index 0, a delta of text
# alone (after the role), nothing else to read. Its content is taken from the bytes as a JSON string literal; an event
# of any other shape is left to json.loads. A JSON string holds no raw newline or unescaped quote, so a match can
# neither start nor end inside another event.
_TEXT_EVENT = re.compile(
    rb'data: ?\{(?:"(?:id|object|model|system_fingerprint|service_tier)": ?"[^"\\\n]*", ?|"created": ?\d+, ?)*'
    rb'"choices": ?\[\{"index": ?0, ?"delta": ?\{(?:"role": ?"assistant", ?)?"content": ?("(?:[^"\\\n]|\\.)*")\}'
    rb'(?:, ?"logprobs": ?null)?, ?"finish_reason": ?null\}\]'
    rb'(?:, ?"(?:obfuscation|service_tier|system_fingerprint)": ?"[^"\\\n]*"|, ?"usage": ?null)*\}\n\n')


def _walk(events: list[Any]) -> tuple[_Parts, Optional[str], Optional[dict], Optional[dict]]:
    """The parts, finish reason and usage the events add up to, or the server's error event (then nothing else counts)."""
    parts = _Parts()
    finish, usage = None, None
    for index, event in enumerate(events):
        if type(event) is not dict:
            raise ValueError(f"a streamed event is {type(event).__name__}, not an object")
        if "choices" not in event and "error" in event:
            return parts, None, None, event
        choices = event.get("choices")
        if event.get("usage"):
            usage = event["usage"]
        # The common event (one choice, index 0) is read inline: this loop runs for every token of every streamed reply.
        if not (type(choices) is list and len(choices) == 1 and type(choice := choices[0]) is dict and choice.get("index", 0) == 0):
            choice = _first_choice(event)
            if choice is None:
                continue
        if choice.get("finish_reason"):
            finish = choice["finish_reason"]
        delta = choice.get("delta")
        if type(delta) is dict:
            content = delta.get("content")
            if type(content) is str and content and (len(delta) == 1 or delta.keys() <= _TEXT_ONLY):
                parts.text.append(content)
                parts.deltas += 1
                if parts.first_token is None:
                    parts.first_token = index
            else:
                parts.add(delta, index)
    return parts, finish, usage, None


def _written(raw: bytes, marks: Marks) -> Optional[Assembled]:
    """A reply whose text deltas are all usual events (_TEXT_EVENT), read without a json.loads per event: the
    contents decoded in one, the other events (role, finish, usage, reasoning) walked as usual. None when any text
    is elsewhere (its order against the usual events would be lost) or the body reads otherwise: assemble() reads it."""
    pieces = _TEXT_EVENT.split(raw)
    if len(pieces) == 1:
        return None
    try:
        texts = json.loads(b"[" + b",".join(pieces[1::2]) + b"]")
        rest = b"".join(pieces[0::2])
        events, _ = _events(rest) if rest.strip() else ([], None)
        parts, finish, usage, error = _walk(events)
    except (ValueError, RecursionError):
        return None
    if error is not None:
        return Assembled(error, None, None, 0)
    if parts.text or parts.transcript or parts.audio:
        return None
    parts.text = texts
    parts.deltas = len(texts) - texts.count("")
    first = next((i for i, text in enumerate(texts) if text), None)
    first_token = None
    if first is not None:   # the first text is near the start: a few matches to its end
        match = next(m for i, m in enumerate(_TEXT_EVENT.finditer(raw)) if i == first)
        first_token = _arrival(marks, match.end() - 2)
    payload = {"choices": [{"index": 0, "message": parts.message(), "finish_reason": finish}], **({"usage": usage} if usage else {})}
    return Assembled(payload, first_token, None, parts.deltas)


def assemble(raw: bytes, marks: Marks) -> Assembled:
    """The completion a stream of chat.completion.chunk events adds up to (the first choice); ValueError on a body that is not SSE JSON."""
    if raw.find(b'"audio"', 0, 1 << 16) < 0 and (written := _written(raw, marks)) is not None:
        return written
    events, end_of = _events(raw)
    if not events:
        raise ValueError("the streamed reply holds no events")
    parts, finish, usage, error = _walk(events)
    if error is not None:
        return Assembled(error, None, None, 0)   # the server's error, read as a non-streamed one would be
    payload = {"choices": [{"index": 0, "message": parts.message(), "finish_reason": finish}], **({"usage": usage} if usage else {})}
    first_token = None if parts.first_token is None else _arrival(marks, end_of(parts.first_token))
    first_audio = None if parts.first_audio is None else _arrival(marks, end_of(parts.first_audio))
    return Assembled(payload, first_token, first_audio, parts.deltas)
