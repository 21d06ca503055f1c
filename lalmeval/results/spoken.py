"""Spoken replies kept as audio files in the run folder (`spoken/<dataset>__<model>/`), referenced by a record's audio_path."""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Optional, Union

import numpy as np
import soundfile as sf

from lalmeval.media.audio import wav_bytes
from lalmeval.results.clips import extension
from lalmeval.results.store import file_name, safe_name

FOLDER = "spoken"
PCM_RATE = 24000   # OpenAI's pcm / pcm16: raw 16-bit little-endian mono at 24 kHz


class SpokenError(Exception):
    """A spoken reply that cannot be kept: not base64, too large, not audio."""


def decoded(data: Union[str, tuple[str, ...], bytes]) -> bytes:
    """The bytes of a reply's audio: base64 text (a stream's pieces each decoded alone: one may end in padding) or raw bytes."""
    if isinstance(data, bytes):
        return data
    try:
        pieces = (data,) if isinstance(data, str) else data
        return b"".join(base64.b64decode(piece, validate=True) for piece in pieces)
    except (binascii.Error, ValueError):
        raise SpokenError("the reply's audio data is not valid base64") from None


def as_file(raw: bytes, audio_format: Optional[str]) -> tuple[bytes, str]:
    """The audio as a file and its extension: headerless pcm / pcm16 (OpenAI's, 24 kHz) wrapped as WAV, a file kept as it came."""
    ext = extension(raw)
    if ext != ".bin":
        return raw, ext
    if audio_format in ("pcm16", "pcm") or audio_format is None:
        if len(raw) % 2:
            raise SpokenError(f"the reply's pcm16 audio has an odd number of bytes ({len(raw)})")
        return bytes(wav_bytes(np.frombuffer(raw, dtype="<i2"), PCM_RATE)), ".wav"
    raise SpokenError(f"the reply's audio is not {audio_format} (its first bytes are no audio file's)")


def seconds_of(path: Path) -> Optional[float]:
    """The duration of an audio file, when libsndfile reads it."""
    try:
        info = sf.info(str(path))
    except (RuntimeError, sf.LibsndfileError):
        return None
    return info.frames / info.samplerate if info.samplerate else None


def keep(root: Path, dataset: str, model: str, sample_id: str, repeat: int, data: Union[str, tuple[str, ...], bytes],
         audio_format: Optional[str], max_bytes: int) -> tuple[str, Optional[float]]:
    """Write one spoken reply under the run folder: its path relative to the run, and its duration (blocking: call in an executor)."""
    raw = decoded(data)
    if not raw:
        raise SpokenError("the reply's audio is empty")
    if len(raw) > max_bytes:
        raise SpokenError(f"reply audio too large: {len(raw) / 1e6:.1f} MB, more than max_audio_mb ({max_bytes / 1e6:g} MB)")
    content, ext = as_file(raw, audio_format)
    folder = root / FOLDER / file_name([dataset, model], "")
    folder.mkdir(parents=True, exist_ok=True)
    name = safe_name(sample_id)[:180] + (f"__r{repeat}" if repeat else "") + ext
    path = folder / name
    tmp = path.with_suffix(ext + ".tmp")
    tmp.write_bytes(content)
    os.replace(tmp, path)   # a reader (a rescore, the report) never meets half a file
    return path.relative_to(root).as_posix(), seconds_of(path)


def read_audio(root: Path, audio_path: str) -> bytes:
    """The bytes of a kept reply (for the transcriber and the report)."""
    return (root / audio_path).read_bytes()
