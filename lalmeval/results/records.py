"""The typed records that flow between stages."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional, Union

Span = tuple[float, float]


@dataclass(frozen=True)
class AudioRef:
    """One clip of a sample: embedded bytes or a file path, and optionally the span of it (seconds) to use."""

    source: Union[bytes, str]
    span: Optional[Span] = None


@dataclass(frozen=True)
class Sample:
    """One dataset row, as loaded: its audio is referenced, decoded only just before its request."""

    id: str
    audio: tuple[AudioRef, ...] = ()
    reference: Optional[str] = None
    instruction: Optional[str] = None
    text_input: Optional[str] = None
    transcript: Optional[str] = None
    language: Optional[str] = None
    subset: Optional[str] = None
    choices: tuple[str, ...] = ()          # multiple choice: the options, in the data's order
    gold: Optional[int] = None             # index of the gold option in `choices`
    images: tuple[Any, ...] = ()           # data.images.ImageRef, in the order they are shown
    conversation: Optional[Any] = None     # data.messages.Conversation: the whole prompt (OpenAI messages)
    turns: tuple[str, ...] = ()            # multi-turn: the user's turns, each sent after the reply to the one before
    problem: Optional[str] = None          # why this row cannot become a request: recorded as its failure

    @property
    def has_audio(self) -> bool:
        return bool(self.audio)


@dataclass(frozen=True)
class Prompt:
    """What a preprocessor makes of a sample: the request's text, system message and layout."""

    text: str                                  # the user's words, flattened (recorded, shown to judges)
    system: Optional[str] = None
    with_audio: bool = True
    conversation: Optional[Any] = None         # data.messages.Conversation when parts interleave (images, a message list)
    options: tuple[str, ...] = ()              # multiple choice: the options as shown, in shown order
    gold: Optional[int] = None                 # ... the gold option's position among them
    permutation: tuple[int, ...] = ()          # ... shown position → the data's option index
    followups: tuple[tuple[Any, ...], ...] = ()  # multi-turn: the parts of each later user turn


@dataclass
class Record:
    """The outcome of one sample on one model: a prediction, or an error with its reason."""

    id: str
    prompt: str
    system: Optional[str]
    params: dict[str, Any]
    reference: Optional[str]
    transcript: Optional[str] = None
    reply: Optional[str] = None
    prediction: Optional[str] = None
    latency: float = 0.0                      # seconds from the request leaving to the reply read (the endpoint's time; see Reply)
    queued: float = 0.0                       # seconds waiting here for a slot (in-flight limit, delay spacing) before it left
    attempts: int = 0
    retry_wait: float = 0.0
    error: Optional[str] = None
    chunks: int = 1
    key: Optional[str] = None                 # identity of the request: a stored prediction is reused only under the same key
    usage: Optional[dict[str, int]] = None    # token counts the server reported (summed over chunks)
    repeat: int = 0                           # which of the repeat_runs asks this is
    subset: Optional[str] = None              # the sample's group (subset_column), for per-subset scores
    extra: dict[str, Any] = field(default_factory=dict)
    ttft: Optional[float] = None              # streamed replies: seconds from the request leaving to the first text token
    ttfa: Optional[float] = None              # ... and to the first audio
    tokens_per_second: Optional[float] = None  # streamed replies: completion tokens over the time after the first one
    audio_path: Optional[str] = None          # a spoken reply's audio, relative to the run folder
    audio_seconds: Optional[float] = None     # ... its duration
    rtf: Optional[float] = None               # ... audio seconds produced per wall second (real-time factor)

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def unit(self) -> tuple[str, int]:
        """What one record answers for: a sample, asked for the `repeat`-th time."""
        return self.id, self.repeat

    def to_json(self) -> dict[str, Any]:
        # Shallow on purpose: dataclasses.asdict deep-copies every field and is hot here.
        return {name: getattr(self, name) for name in _RECORD_FIELDS}


@dataclass(frozen=True)
class Score:
    """A metric's result for one (model, dataset, metric), with its 95% interval and standard error."""

    model: str
    dataset: str
    metric: str
    score: Optional[float]
    num_samples: int
    num_failed: int
    details: dict[str, Any]
    ci95: Optional[tuple[float, float]] = None  # same units as score; None when not computable
    stderr: Optional[float] = None
    usage: Optional[dict[str, int]] = None        # the model's tokens over the records scored (results.usage.Usage.to_json)
    judge_usage: Optional[dict[str, int]] = None  # the judge's tokens spent scoring them (judge metrics)
    samples: Any = field(default=None, repr=False, compare=False)  # stats.SampleStats, for paired comparisons

    def to_json(self) -> dict[str, Any]:
        """The entry of final_scores.json (per-sample statistics stay out)."""
        out = {name: getattr(self, name) for name in _SCORE_FIELDS if name != "samples" and (name != "judge_usage" or self.judge_usage)}
        out["ci95"] = list(self.ci95) if self.ci95 is not None else None
        return out


_RECORD_FIELDS = tuple(f.name for f in fields(Record))
_SCORE_FIELDS = tuple(f.name for f in fields(Score))


def failure_kind(reason: str) -> str:
    """A short, countable form of a failure reason: 'HTTP 429', 'timeout', 'audio', ..."""
    for prefix in ("timeout", "endpoint down", "reply too large"):
        if reason.startswith(prefix):
            return prefix
    return reason.split(":", 1)[0].strip()
