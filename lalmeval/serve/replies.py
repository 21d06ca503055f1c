"""A model's answers made into checked Replies: a malformed one is that request's 500 "model bug", never a 200."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Optional, Union

from lalmeval.serve.errors import ApiError
from lalmeval.serve.model import Answer, AudioModel, ChatInput, Reply, Segment

SAMPLE_RATE = 16000
FINISH_REASONS = ("stop", "length", "content_filter")
MAX_COUNT = 2**53  # a token count past what a JSON number holds exactly is not a count


class ModelBug(ApiError):
    """HTTP 500: the model answered something the API cannot send (the message says what)."""

    def __init__(self, message: str):
        super().__init__(500, f"model bug: {message}")

    def __reduce__(self):  # crosses from a worker process to the server intact
        return ModelBug, (self.message.removeprefix("model bug: "),)


def _prompt_text(item: Any) -> str:
    if isinstance(item, ChatInput):
        return "\n".join(t for t in (item.system, item.text) if t)
    return item.prompt or ""


def _duration(item: Any) -> float:
    audios = item.audios if isinstance(item, ChatInput) else [item.audio]
    return sum(len(a) for a in audios) / SAMPLE_RATE


def _count(owner: str, field: str, value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__") or not 0 <= int(value) < MAX_COUNT:
        raise ModelBug(f"{owner}.{field} is {value!r}, not a count (a whole number from 0)")
    return int(value)


def _text(owner: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ModelBug(f"{owner}.text is {type(value).__name__}, not str")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ModelBug(f"{owner}.text is not valid Unicode (it holds a lone surrogate)") from None
    return str(value)


def _seconds(owner: str, field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ModelBug(f"{owner}.{field} is {value!r}, not a finite number")
    return float(value)


def _segment(i: int, segment: Any) -> Segment:
    owner = f"segments[{i}]"
    if not isinstance(segment, Segment):
        raise ModelBug(f"{owner} is {type(segment).__name__}, not a Segment")
    start, end = _seconds(owner, "start", segment.start), _seconds(owner, "end", segment.end)
    if not 0 <= start <= end:
        raise ModelBug(f"{owner} runs from {start:g} s to {end:g} s (a segment starts at 0 or later and ends after it starts)")
    numbers = {name: _seconds(owner, name, getattr(segment, name)) for name in ("avg_logprob", "no_speech_prob", "compression_ratio")}
    tokens = tuple(_count(owner, "tokens[]", t) for t in segment.tokens)
    return Segment(start, end, _text(owner, segment.text), tokens, **numbers)


def checked(reply: Reply) -> Reply:
    """The reply with plain ints and floats, or ModelBug naming the first thing the API cannot send."""
    text = _text("Reply", reply.text)
    counts = {name: _count("Reply", name, getattr(reply, name)) for name in ("completion_tokens", "prompt_tokens", "audio_tokens")}
    if counts["audio_tokens"] > counts["prompt_tokens"]:
        raise ModelBug(f"Reply.audio_tokens ({counts['audio_tokens']}) is more than prompt_tokens ({counts['prompt_tokens']}), which include them")
    if reply.finish_reason not in FINISH_REASONS:
        raise ModelBug(f"Reply.finish_reason is {reply.finish_reason!r}, not one of {', '.join(FINISH_REASONS)}")
    if not isinstance(reply.segments, (tuple, list)):
        raise ModelBug(f"Reply.segments is {type(reply.segments).__name__}, not a tuple of Segments")
    if reply.language is not None and not isinstance(reply.language, str):
        raise ModelBug(f"Reply.language is {type(reply.language).__name__}, not a str or None")
    segments = tuple(_segment(i, s) for i, s in enumerate(reply.segments))
    return replace(reply, text=text, segments=segments, **counts)


def as_reply(model: AudioModel, item: Any, answer: Answer) -> Union[Reply, ApiError]:
    """A plain-str answer as a Reply: tokens counted by the model, max_tokens applied, one segment of the whole clip."""
    if isinstance(answer, (Reply, ApiError)):
        return answer
    if not isinstance(answer, str):
        raise ModelBug(f"{type(model).__name__} answered {type(answer).__name__}, not str or Reply")
    limit: Optional[int] = item.max_tokens if isinstance(item, ChatInput) else None
    finish = "stop"
    if limit is not None and model.count_tokens(answer) > limit:
        words = answer.split()
        answer, finish = " ".join(words[:limit]), "length"  # the default count is words: cut at the limit
    return Reply(answer, model.count_tokens(answer), model.count_tokens(_prompt_text(item)), finish_reason=finish,
                 segments=(Segment(0.0, round(_duration(item), 3), answer),))


def stopped(model: AudioModel, item: Any, reply: Union[Reply, ApiError]) -> Union[Reply, ApiError]:
    """The reply cut before the first of the request's stop sequences, its completion tokens recounted."""
    stops = item.stop if isinstance(item, ChatInput) and isinstance(reply, Reply) else ()
    cut = min((at for at in (reply.text.find(s) for s in stops) if at >= 0), default=-1)  # type: ignore[union-attr]
    if cut < 0:
        return reply
    text = reply.text[:cut]  # type: ignore[union-attr]
    # the model's segments told the whole reply: the cut one is a single piece
    return replace(reply, text=text, completion_tokens=model.count_tokens(text), finish_reason="stop", segments=())


def one_reply(model: AudioModel, item: Any, answer: Any) -> Union[Reply, ApiError]:
    """The checked Reply for one answer, or the ApiError that request gets (a malformed answer is a ModelBug)."""
    try:
        reply = as_reply(model, item, answer)
        if isinstance(reply, ApiError) and not (400 <= reply.status <= 599 and isinstance(reply.message, str)):
            raise ModelBug(f"{type(model).__name__} refused a request with status {reply.status!r}, not an error status (400-599)")
        return checked(stopped(model, item, checked(reply))) if isinstance(reply, Reply) else reply  # a cut reply is recounted
    except ModelBug as exc:
        return exc
