"""Split long audio into pieces of at most `max_seconds`, cutting in silences found by WebRTC VAD.

Cutting every `max_seconds` splits words, and a model hears the halves as two other words.
Instead, for each piece we look back from its limit and cut in the middle of

1. the longest silence of at least `min_silence_ms` in the last `search_seconds` before the
   limit (default: a third of the piece), so that pieces stay long; failing that,
2. the longest such silence anywhere in the piece; failing that,
3. the longest shorter silence (the quietest among equals).

Only a piece with no silence at all is cut hard at its limit, and `Split.hard_cuts` says where.
`min_silence_ms` (150) is above the non-speech the VAD finds between and inside words said in
one breath (up to 120 ms on the test speech, stop closures mostly): such gaps are used only
when nothing longer exists. CPU work (one VAD call per 30 ms frame): call it off the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import numpy as np

VAD_RATES = (8000, 16000, 32000, 48000)
FRAME_MS = 30


@dataclass(frozen=True)
class Split:
    """Sample ranges covering the clip in order, and the cuts that had to fall in speech."""

    ranges: list[tuple[int, int]]
    hard_cuts: list[int] = field(default_factory=list)


def speech_frames(pcm16: np.ndarray, rate: int, aggressiveness: int = 3) -> np.ndarray:
    """Whether each whole 30 ms frame holds speech, by WebRTC VAD (a trailing partial frame is left out)."""
    import webrtcvad

    if rate not in VAD_RATES:
        raise ValueError(f"VAD needs a sample rate of {', '.join(map(str, VAD_RATES))} Hz, got {rate}")
    if pcm16.dtype != np.int16 or pcm16.ndim != 1:
        raise ValueError("VAD needs 16-bit mono samples (a 1-D int16 array)")
    size = rate * FRAME_MS // 1000
    count = len(pcm16) // size
    frames = np.ascontiguousarray(pcm16[: count * size]).reshape(count, size)
    vad = webrtcvad.Vad(aggressiveness)
    return np.fromiter((vad.is_speech(frame.tobytes(), rate) for frame in frames), dtype=bool, count=count)


def silences(speech: np.ndarray, frame: int) -> list[tuple[int, int]]:
    """Sample ranges [start, end) of the runs of non-speech frames."""
    quiet = np.concatenate(([False], ~speech, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(quiet))
    return [(int(a) * frame, int(b) * frame) for a, b in zip(edges[::2], edges[1::2])]


class _Silence(NamedTuple):
    start: int
    end: int
    loudness: float  # mean square of its samples


def _measured(pcm16: np.ndarray, spans: list[tuple[int, int]]) -> list[_Silence]:
    squares = np.concatenate(([0.0], np.cumsum(pcm16.astype(np.float64) ** 2)))
    return [_Silence(a, b, float((squares[b] - squares[a]) / (b - a))) for a, b in spans]


def _cut(quiet: list[_Silence], start: int, limit: int, search: int, min_len: int) -> Optional[int]:
    """Where to end the piece that starts at `start` and may reach `limit`; None when it holds no silence."""
    best, best_key = None, None
    for silence in quiet:
        if silence.start < start:
            continue  # the silence the previous cut fell in: cutting it again leaves a sliver
        a, b = max(silence.start, start + 1), min(silence.end, limit)
        if b <= a:
            continue
        # Long enough; if so, near the limit; then longer, then quieter (30 ms frames make equal
        # lengths common, and a pause is quieter than a stop closure), then later.
        long_enough = b - a >= min_len
        key = (long_enough, long_enough and b > limit - search, b - a, -silence.loudness, b)
        if best_key is None or key > best_key:
            best, best_key = (a + b) // 2, key
    return best


def split_at_silences(
    pcm16: np.ndarray,
    rate: int = 16000,
    max_seconds: float = 30.0,
    *,
    search_seconds: Optional[float] = None,
    min_silence_ms: int = 150,
    aggressiveness: int = 3,
) -> Split:
    """Pieces of at most `max_seconds` covering `pcm16`, cut in silences (see the module docstring)."""
    limit = int(max_seconds * rate)
    if limit <= 0:
        raise ValueError(f"max_seconds must be positive, got {max_seconds}")
    if len(pcm16) <= limit:
        return Split([(0, len(pcm16))])
    search = int((search_seconds if search_seconds is not None else max_seconds / 3) * rate)
    frame = rate * FRAME_MS // 1000
    quiet = _measured(pcm16, silences(speech_frames(pcm16, rate, aggressiveness), frame))
    ranges, hard, start = [], [], 0
    while len(pcm16) - start > limit:
        cut = _cut(quiet, start, start + limit, search, min_silence_ms * rate // 1000)
        if cut is None:
            cut = start + limit
            hard.append(cut)
        ranges.append((start, cut))
        start = cut
    ranges.append((start, len(pcm16)))
    return Split(ranges, hard)
