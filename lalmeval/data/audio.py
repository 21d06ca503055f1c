"""Audio decoding, resampling to 16 kHz mono, WAV encoding and chunking (CPU work: call off the loop)."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import stat
import struct
import threading
from dataclasses import dataclass, field
from typing import Optional, Union

import numpy as np
import soundfile as sf
import soxr

from lalmeval.files import system_tree

TARGET_RATE = 16000


class AudioError(Exception):
    """A clip that cannot be used; the message is the recorded reason."""


def _check_regular(path: str) -> os.stat_result:
    """A named pipe or a device would block the reader for ever; a directory is not a clip; /proc holds secrets."""
    tree = system_tree(path)
    if tree is not None:
        raise AudioError(f"audio path is a system file under {tree}, never read: {path}")
    try:
        info = os.stat(path)
    except OSError as exc:
        raise AudioError(f"audio file not readable: {exc.strerror or exc}: {path}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise AudioError(f"audio path is {kind}: {path}")
    return info


_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}
_FILE_DIGESTS_LOCK = threading.Lock()


def source_digest(source: Union[bytes, str]) -> str:
    """SHA-1 of the clip's bytes as stored (embedded bytes, or the file's content).

    This is the identity of "the audio behind an id": a changed file changes it. File digests are
    remembered by (path, size, mtime) so that resuming a run does not hash a file twice."""
    if isinstance(source, bytes):
        return hashlib.sha1(source).hexdigest()
    info = _check_regular(source)
    key = (source, info.st_size, info.st_mtime_ns)
    with _FILE_DIGESTS_LOCK:
        if key in _FILE_DIGESTS:
            return _FILE_DIGESTS[key]
    digest = hashlib.sha1()
    try:
        with open(source, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:
        raise AudioError(f"audio file not readable: {exc.strerror or exc}: {source}") from None
    with _FILE_DIGESTS_LOCK:
        if len(_FILE_DIGESTS) > 100_000:
            _FILE_DIGESTS.clear()
        _FILE_DIGESTS[key] = digest.hexdigest()
    return _FILE_DIGESTS[key]


Span = tuple[float, float]


def _frames(span: Span, rate: int, total: int) -> tuple[int, int]:
    """First frame and frame count of `span` (seconds); a span outside the clip is an AudioError."""
    start, end = span
    if not (0 <= start < end):
        raise AudioError(f"invalid span {start:.3f}-{end:.3f} s")
    first, last = round(start * rate), round(end * rate)
    if first >= total:
        raise AudioError(f"span {start:.3f}-{end:.3f} s starts after the end of the audio ({total / rate:.3f} s)")
    if last > total:
        raise AudioError(f"span {start:.3f}-{end:.3f} s ends after the audio ({total / rate:.3f} s)")
    return first, max(1, last - first)


def audio_identity(source: Union[bytes, str], span: Optional[Span] = None) -> str:
    """What identifies the audio a request carries: the source's digest, and the span cut from it."""
    digest = source_digest(source)
    return digest if span is None else f"{digest}@{span[0]:.3f}-{span[1]:.3f}"


def _read(source: Union[bytes, str], as_pcm16_if_ready: bool, span: Optional[Span] = None) -> tuple[np.ndarray, int]:
    """Samples and rate; int16 when `as_pcm16_if_ready` and the clip is already 16-bit 16 kHz mono."""
    if isinstance(source, str):
        _check_regular(source)
    try:
        with sf.SoundFile(io.BytesIO(source) if isinstance(source, bytes) else source) as clip:
            rate = clip.samplerate
            if rate <= 0:
                raise AudioError(f"invalid sample rate {rate}")
            ready = as_pcm16_if_ready and rate == TARGET_RATE and clip.channels == 1 and clip.subtype in ("PCM_16", "PCM_S8", "PCM_U8")
            frames = -1
            if span is not None:
                # Seek rather than decode the whole file: a call is many minutes, an utterance seconds.
                first, frames = _frames(span, rate, clip.frames)
                clip.seek(first)
            data = clip.read(frames, dtype="int16" if ready else "float32", always_2d=not ready)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise AudioError(f"unreadable audio: {str(exc).strip() or type(exc).__name__}") from None
    except OSError as exc:
        raise AudioError(f"audio file not readable: {exc.strerror or exc}") from None
    if data.shape[0] == 0:
        raise AudioError("audio has no samples")
    return data, rate


def _to_mono_16k(data: np.ndarray, rate: int, target_rate: int) -> np.ndarray:
    mono = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if not np.isfinite(mono).all():
        raise AudioError("audio contains NaN or infinite samples")
    if rate != target_rate:
        mono = soxr.resample(mono, rate, target_rate).astype(np.float32, copy=False)
    return mono


def decode(source: Union[bytes, str], target_rate: int = TARGET_RATE, span: Optional[Span] = None) -> np.ndarray:
    """Decode any soundfile-readable clip (or its `span` in seconds) to float32 mono at `target_rate`."""
    data, rate = _read(source, as_pcm16_if_ready=False, span=span)
    return _to_mono_16k(data, rate, target_rate)


def duration(source: Union[bytes, str]) -> Optional[float]:
    """Clip duration in seconds from the header alone; None when the header cannot be read."""
    try:
        if isinstance(source, str):
            _check_regular(source)
        info = sf.info(io.BytesIO(source) if isinstance(source, bytes) else source)
    except Exception:  # a corrupt or missing clip fails later, at decode, with its reason recorded
        return None
    return info.frames / info.samplerate if info.samplerate else None


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    """float32 in [-1, 1] → int16, rounding and clipping (16-bit sources round-trip exactly)."""
    return np.clip(np.rint(samples * 32768.0), -32768, 32767).astype("<i2")


def wav_bytes(pcm: np.ndarray, rate: int = TARGET_RATE) -> bytearray:
    """A 16-bit mono PCM WAV file holding `pcm` (one copy of the samples, not two: this runs per request)."""
    size = pcm.nbytes
    out = bytearray(44 + size)
    struct.pack_into("<4sI4s4sIHHIIHH4sI", out, 0, b"RIFF", 36 + size, b"WAVE", b"fmt ", 16, 1, 1, rate, rate * 2, 2, 16, b"data", size)
    out[44:] = memoryview(np.ascontiguousarray(pcm, dtype="<i2")).cast("B")
    return out


@dataclass
class PreparedAudio:
    """A clip ready to send: 16-bit 16 kHz mono PCM, and its base64 WAV made once.

    The WAV itself is not kept: it is the PCM plus a 44-byte header, rebuilt when a multipart
    request needs it, so a clip in flight costs its PCM and its base64 only."""

    pcm: np.ndarray
    digest: str = ""
    _b64: Optional[bytes] = field(default=None, repr=False)

    @property
    def seconds(self) -> float:
        return len(self.pcm) / TARGET_RATE

    @property
    def wav(self) -> bytes:
        return bytes(wav_bytes(self.pcm))

    @property
    def b64(self) -> bytes:
        if self._b64 is None:
            self._b64 = base64.b64encode(wav_bytes(self.pcm))
        return self._b64

    def chunks(self, max_seconds: Optional[float], mode: str = "chunk") -> list["PreparedAudio"]:
        """The clip as pieces of at most `max_seconds` (the clip itself when it fits).

        chunk: fixed cuts every max_seconds; truncate: only the first max_seconds; vad: cuts in the
        silences nearest each limit (WebRTC VAD), so no word is split unless a stretch of speech is
        longer than max_seconds."""
        if not max_seconds or self.seconds <= max_seconds:
            return [self]
        step = max(1, int(max_seconds * TARGET_RATE))
        if mode == "truncate":
            return [PreparedAudio(self.pcm[:step], self.digest + "@truncated")]
        if mode == "vad":
            from lalmeval.data.vad import split_at_silences

            ranges = split_at_silences(self.pcm, TARGET_RATE, max_seconds).ranges
            return [PreparedAudio(self.pcm[a:b]) for a, b in ranges]
        return [PreparedAudio(self.pcm[i : i + step]) for i in range(0, len(self.pcm), step)]

    def encoded(self) -> "PreparedAudio":
        """Compute the WAV and base64 forms now (call in a worker thread)."""
        _ = self.b64
        return self


def prepare(source: Union[bytes, str], span: Optional[Span] = None) -> PreparedAudio:
    """Decode, resample and encode a clip, or its `span` in seconds, for sending (16-bit 16 kHz mono is taken as is)."""
    data, rate = _read(source, as_pcm16_if_ready=True, span=span)
    pcm = data if data.dtype == np.int16 else to_pcm16(_to_mono_16k(data, rate, TARGET_RATE))
    pcm = np.ascontiguousarray(pcm)
    return PreparedAudio(pcm, audio_identity(source, span)).encoded()
