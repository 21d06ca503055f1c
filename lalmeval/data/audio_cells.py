"""A row's audio cell read as clip references: a path, raw bytes, an HF struct {bytes, path}, or a span."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

from lalmeval.files import data_path
from lalmeval.media.images import is_missing
from lalmeval.results.records import AudioRef


def _shown(value: Any) -> str:
    """A cell as text for an error message (a struct as JSON; dates or bytes inside it as their str)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _seconds(clip: dict, key: str) -> float:
    value = clip[key]
    try:
        seconds = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds):
        raise ValueError(f"span {key} {value!r} is not a number of seconds")
    return seconds


def _span(clip: dict) -> Optional[tuple[float, float]]:
    """The {start, end} of a clip struct in seconds, checked; None when it has neither."""
    if clip.get("start") is None and clip.get("end") is None:
        return None
    if clip.get("start") is None or clip.get("end") is None:
        raise ValueError(f"a span needs both start and end (got start {clip.get('start')!r}, end {clip.get('end')!r})")
    start, end = _seconds(clip, "start"), _seconds(clip, "end")
    if not 0 <= start < end:
        raise ValueError(f"invalid span {start:.3f}-{end:.3f} s (expected 0 <= start < end)")
    return start, end


def _one_audio(value: Any, base: Path) -> Optional[AudioRef]:
    """One clip: a path, raw bytes, an HF struct {bytes, path}, or a {path, start, end} span; ValueError when malformed."""
    span = None
    if isinstance(value, dict):
        if "bytes" not in value and "path" not in value:
            raise ValueError(f"a clip struct holds 'bytes' or 'path' (keys: {', '.join(map(str, value)) or 'none'})")
        span = _span(value)
        data = value.get("bytes")
        if data:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise ValueError(f"'bytes' holds {type(data).__name__}, not bytes")
            return AudioRef(bytes(data), span)
        value = value.get("path")
    if isinstance(value, (bytes, bytearray, memoryview)) and value:
        return AudioRef(bytes(value), span)
    if isinstance(value, str) and value:
        return AudioRef(str(data_path(value, base)), span)
    if is_missing(value) or value == b"":
        return None
    raise ValueError(f"expected a path, bytes, {{bytes, path}} or {{path, start, end}}, got {type(value).__name__} {_shown(value)[:80]!r}")


def audio_refs(value: Any, base: Path) -> tuple[AudioRef, ...]:
    """A row's audio: an HF struct {bytes, path}, a path, a {path, start, end} span, or a list of those.

    A malformed value raises ValueError (the row then fails alone, with the reason)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return tuple(ref for ref in (_one_audio(v, base) for v in values) if ref is not None)
