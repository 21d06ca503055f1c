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

    @property
    def has_audio(self) -> bool:
        return bool(self.audio)


@dataclass(frozen=True)
class Prompt:
    """What a preprocessor makes of a sample: the text to send and whether audio goes with it."""

    text: str
    system: Optional[str] = None
    with_audio: bool = True


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
    latency: float = 0.0
    attempts: int = 0
    retry_wait: float = 0.0
    error: Optional[str] = None
    chunks: int = 1
    key: Optional[str] = None                 # identity of the request: a stored prediction is reused only under the same key
    usage: Optional[dict[str, int]] = None    # token counts the server reported (summed over chunks)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.error is not None

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
    samples: Any = field(default=None, repr=False, compare=False)  # stats.SampleStats, for paired comparisons

    def to_json(self) -> dict[str, Any]:
        """The entry of final_scores.json (per-sample statistics stay out)."""
        out = {name: getattr(self, name) for name in _SCORE_FIELDS if name != "samples"}
        out["ci95"] = list(self.ci95) if self.ci95 is not None else None
        return out


_RECORD_FIELDS = tuple(f.name for f in fields(Record))
_SCORE_FIELDS = tuple(f.name for f in fields(Score))
