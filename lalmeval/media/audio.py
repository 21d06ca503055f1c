"""Audio decoding, resampling to 16 kHz mono, WAV encoding and chunking (CPU work: call off the loop)."""

from __future__ import annotations

import base64
import hashlib
import io
import math
import os
import re
import stat
import struct
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

import numpy as np
import soundfile as sf
import soxr

from lalmeval.data.containers import AvClip, ContainerError
from lalmeval.files import system_tree
from lalmeval.text import clipped

TARGET_RATE = 16000


class AudioError(Exception):
    """A clip that cannot be used; the message is the recorded reason."""


def _check_regular(path: str) -> os.stat_result:
    """A named pipe or a device would block the reader for ever; a directory is not a clip; /proc holds secrets."""
    tree = system_tree(path)
    if tree is not None:
        raise AudioError(f"audio path is a system file under {tree}, never read: {clipped(str(path))}")
    try:
        info = os.stat(path)
    except OSError as exc:
        raise AudioError(f"audio file not readable: {exc.strerror or exc}: {clipped(str(path))}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise AudioError(f"audio path is {kind}: {clipped(str(path))}")
    return info


_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}
_FILE_DIGESTS_LOCK = threading.Lock()


def source_digest(source: Union[bytes, str], info: Optional[os.stat_result] = None) -> str:
    """SHA-1 of the clip's bytes as stored (embedded bytes, or the file's content).

    This is the identity of "the audio behind an id": a changed file changes it. File digests are
    remembered by (path, size, mtime) so that resuming a run does not hash a file twice. `info`: the
    file's stat from _check_regular, when the caller has checked it already."""
    if isinstance(source, bytes):
        return hashlib.sha1(source).hexdigest()
    info = info or _check_regular(source)
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
        raise AudioError(f"audio file not readable: {exc.strerror or exc}: {clipped(str(source))}") from None
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


def audio_identity(source: Union[bytes, str], span: Optional[Span] = None, info: Optional[os.stat_result] = None) -> str:
    """What identifies the audio a request carries: the source's digest, and the span cut from it."""
    digest = source_digest(source, info)
    return digest if span is None else f"{digest}@{span[0]:.3f}-{span[1]:.3f}"


def identity_digest(identity: str) -> str:
    """The source's digest an audio_identity (or a piece's, `…@truncated`) starts with."""
    return identity.partition("@")[0]


BLOCK_SECONDS = 20.0        # source audio decoded (and resampled) at a time: a long clip never exists as float copies whole
UNKNOWN_FRAMES = 2**63 - 1  # libsndfile's frame count when the header does not say (a streamed FLAC, some MP3s)
TRUNCATE_MARGIN = 0.1       # seconds decoded past a truncation, so the resampler's edge falls in what is cut off


class ClipTooLong(AudioError):
    """A clip over the length limit, found from its header or while decoding; `how` says which (a server words its own fix)."""

    def __init__(self, message: str, limit: float, how: str):
        super().__init__(message)
        self.limit, self.how = limit, how


def _too_long(seconds: float, limit: float, measured: bool) -> AudioError:
    how = "decoding went past it (the header does not give the length)" if measured else f"its header says {seconds:.1f} s"
    return ClipTooLong(f"clip longer than max_audio_seconds ({limit:g} s): {how}; raise max_audio_seconds, "
                       f"or set the model's chunk_size with long_audio: truncate to send only its start", limit, how)


_IN_MEMORY = re.compile(r"Error opening <_io\.BytesIO object at 0x[0-9a-fA-F]+>: ")


@contextmanager
def _read_errors() -> Iterator[None]:
    """What soundfile or PyAV raises for a bad clip, as the AudioError recorded for its sample."""
    try:
        yield
    except ContainerError as exc:
        raise AudioError(f"unreadable audio: {exc}") from None
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        # "Error opening <_io.BytesIO object at 0x7f..>: " names no file and changes every call: the reason is the rest
        reason = _IN_MEMORY.sub("", str(exc)).strip()
        raise AudioError(f"unreadable audio: {reason or type(exc).__name__}") from None
    except OSError as exc:
        raise AudioError(f"audio file not readable: {exc.strerror or exc}") from None


class _Decoder:
    """An open clip, read block by block: a span of it, its first seconds, or all of it.

    `ready` clips (16-bit 16 kHz mono, when asked for) come as int16, others as mono float32 at the
    clip's own rate. A clip longer than `max_seconds` fails on opening when its header says so, and
    as soon as decoding passes the limit when the header does not give its length."""

    def __init__(self, handle: Union[sf.SoundFile, AvClip], span: Optional[Span], max_seconds: Optional[float],
                 first_seconds: Optional[float], pcm16_if_ready: bool):
        self.handle, self.rate, self.max_seconds = handle, handle.samplerate, max_seconds
        if self.rate <= 0:
            raise AudioError(f"invalid sample rate {self.rate}")
        self.ready = pcm16_if_ready and self.rate == TARGET_RATE and handle.channels == 1 and handle.subtype in ("PCM_16", "PCM_S8", "PCM_U8")
        known = handle.frames if 0 <= handle.frames < UNKNOWN_FRAMES else None
        first, self.count = 0, known
        if span is not None:
            # Seek rather than decode the whole file: a call is many minutes, an utterance seconds.
            first, self.count = _frames(span, self.rate, known if known is not None else UNKNOWN_FRAMES)
        if first_seconds is not None:
            cut = math.ceil((first_seconds + TRUNCATE_MARGIN) * self.rate)
            self.count = cut if self.count is None else min(self.count, cut)
        self.limit = None if max_seconds is None else math.floor(max_seconds * self.rate)
        if self.limit is not None and self.count is not None and self.count > self.limit:
            raise _too_long(self.count / self.rate, max_seconds, measured=False)
        # A container's header gives its length roughly: enough to refuse a clip far over the limit
        # unread, and to size the result; the reading itself goes to the end or the limit.
        self.hint = self.count if self.count is not None else getattr(handle, "header_frames", None)
        if self.limit is not None and self.count is None and first_seconds is None and span is None and self.hint and self.hint > self.limit:
            raise _too_long(self.hint / self.rate, max_seconds, measured=False)
        if first:
            handle.seek(first)

    def blocks(self) -> Iterator[np.ndarray]:
        block, done = max(1, int(BLOCK_SECONDS * self.rate)), 0
        while self.count is None or done < self.count:
            want = block if self.count is None else min(block, self.count - done)
            if self.limit is not None:
                want = min(want, self.limit + 1 - done)  # one frame past the limit shows a longer clip
            data = self._read(want)
            done += len(data)
            if self.limit is not None and done > self.limit:
                raise _too_long(done / self.rate, self.max_seconds, measured=True)
            if len(data):
                yield data if self.ready else _mono(data)
            if len(data) < want:
                break
        if not done:
            raise AudioError("audio has no samples")


    def _read(self, frames: int) -> np.ndarray:
        if isinstance(self.handle, AvClip):
            return self.handle.read(frames)
        dtype = "int16" if self.ready else "float32"
        if self.count is not None:
            return self.handle.read(frames, dtype=dtype, always_2d=not self.ready)
        # soundfile seeks to keep its position after every read, and at the end of a clip whose header
        # has no length that seek fails: read through libsndfile itself, which just returns fewer frames.
        out = np.empty((frames, self.handle.channels), dtype=dtype)
        ctype = "short" if self.ready else "float"
        read = getattr(sf._snd, f"sf_readf_{ctype}")(self.handle._file, sf._ffi.cast(f"{ctype} *", sf._ffi.from_buffer(out)), frames)
        sf._error_check(self.handle._errorcode)
        return out[:read, 0] if self.ready else out[:read]


def _mono(data: np.ndarray) -> np.ndarray:
    mono = data.mean(axis=1, dtype=np.float32) if data.shape[1] > 1 else data[:, 0]
    if not np.isfinite(mono).all():
        raise AudioError("audio contains NaN or infinite samples")
    return mono


# libsndfile's "Format not recognised" and "Unsupported encoding": a clip it cannot read at all, which
# FFmpeg (PyAV) may. A clip libsndfile recognises but finds damaged is not handed on: it fails as damaged.
_NOT_ITS_FORMAT = (1, 4)


def _open(source: Union[bytes, str]) -> Union[sf.SoundFile, AvClip]:
    """The clip opened by libsndfile, or by FFmpeg when libsndfile does not read its format."""
    try:
        return sf.SoundFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except sf.LibsndfileError as exc:
        if exc.code not in _NOT_ITS_FORMAT:
            raise
        first = str(exc.error_string).strip().rstrip(".")
    try:
        return AvClip(source, UNKNOWN_FRAMES)
    except ContainerError as exc:
        what = f"'{source}'" if isinstance(source, str) else "its bytes"
        raise ContainerError(f"neither libsndfile ({first}) nor FFmpeg ({exc}) reads {what}") from None


@contextmanager
def _decoder(source: Union[bytes, str], span: Optional[Span], max_seconds: Optional[float], first_seconds: Optional[float],
             pcm16_if_ready: bool, checked: bool = False) -> Iterator[_Decoder]:
    if isinstance(source, str) and not checked:
        _check_regular(source)
    with _read_errors(), _open(source) as handle:
        yield _Decoder(handle, span, max_seconds, first_seconds, pcm16_if_ready)


def _resampled(decoder: _Decoder, target_rate: int) -> Iterator[np.ndarray]:
    """The decoder's blocks at `target_rate`, resampled as one stream (the same samples as resampling
    the clip whole, without ever holding it whole in float)."""
    if decoder.rate == target_rate:
        yield from decoder.blocks()
        return
    stream = soxr.ResampleStream(decoder.rate, target_rate, 1, dtype="float32")
    for data in decoder.blocks():
        yield stream.resample_chunk(data, last=False)
    yield stream.resample_chunk(np.zeros(0, np.float32), last=True)


def _gather(pieces: Iterator[np.ndarray], expected: Optional[int], dtype: type) -> np.ndarray:
    """The pieces as one array, written into one allocation when the length is known ahead."""
    if expected is None:
        return np.concatenate([np.asarray(p, dtype=dtype) for p in pieces])
    out, at = np.empty(expected + 64, dtype=dtype), 0
    for piece in pieces:
        if at + len(piece) > len(out):  # the header was short of the truth: grow (rare)
            out = np.concatenate([out[:at], np.empty(max(len(piece), len(out) // 2), dtype=dtype)])
        out[at : at + len(piece)] = piece
        at += len(piece)
    return out[:at]


def decode(source: Union[bytes, str], target_rate: int = TARGET_RATE, span: Optional[Span] = None,
           max_seconds: Optional[float] = None) -> np.ndarray:
    """Decode a clip soundfile or PyAV reads (or its `span` in seconds) to float32 mono at `target_rate`."""
    with _decoder(source, span, max_seconds, None, False) as decoder:
        return _gather(_resampled(decoder, target_rate), _expected(decoder, target_rate), np.float32)


def pcm16(source: Union[bytes, str], span: Optional[Span] = None, max_seconds: Optional[float] = None,
          first_seconds: Optional[float] = None, checked: bool = False) -> np.ndarray:
    """The clip (its span, its first seconds) as 16-bit 16 kHz mono, decoded and resampled block by block:
    memory holds the result and one block, never the clip in float (16-bit 16 kHz mono is taken as is).
    `checked`: the caller has checked a path source with _check_regular already."""
    with _decoder(source, span, max_seconds, first_seconds, True, checked) as decoder:
        pieces = (p if p.dtype == np.int16 else to_pcm16(p) for p in _resampled(decoder, TARGET_RATE))
        return _gather(pieces, _expected(decoder, TARGET_RATE), np.int16)


PROBE_SECONDS = 1.0  # what `probe` decodes of a clip: enough to show its codec works, little enough for every clip of a dataset


def probe(source: Union[bytes, str], span: Optional[Span] = None, max_seconds: Optional[float] = None) -> None:
    """Open a clip as a run would, check its header against `max_seconds`, and decode its first second;
    AudioError with the reason a run would record when it cannot be used (damage further in is not seen)."""
    with _decoder(source, span, max_seconds, None, False) as decoder:
        wanted = max(1, int(PROBE_SECONDS * decoder.rate))
        decoder.count = wanted if decoder.count is None else min(decoder.count, wanted)
        decoder.limit = None  # the header was checked on opening; the first second is within any limit
        for _ in decoder.blocks():
            pass


def _expected(decoder: _Decoder, target_rate: int) -> Optional[int]:
    return None if not decoder.hint else math.ceil(decoder.hint * target_rate / decoder.rate)


def duration(source: Union[bytes, str]) -> Optional[float]:
    """Clip duration in seconds from the header alone (a container's: its estimate); None when the header cannot be read."""
    try:
        if isinstance(source, str):
            _check_regular(source)
        with _open(source) as handle:
            rate = handle.samplerate
            frames = handle.frames if 0 <= handle.frames < UNKNOWN_FRAMES else getattr(handle, "header_frames", None)
    except Exception:  # a corrupt or missing clip fails later, at decode, with its reason recorded
        return None
    if not rate or frames is None:
        return None  # the header does not say (decoding finds out, and max_audio_seconds bounds it)
    return frames / rate


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


def prepare(source: Union[bytes, str], span: Optional[Span] = None, max_seconds: Optional[float] = None,
            first_seconds: Optional[float] = None) -> PreparedAudio:
    """Decode, resample and encode a clip, or its `span` in seconds (or only its first seconds), for sending.

    A clip longer than `max_seconds` (max_audio_seconds) fails with an AudioError before it is decoded
    whole. The identity is the whole clip's (or span's): a truncation is the model's setting, not the audio."""
    # The path is checked once for decoding and digest alike: the check resolves it, a component at a time.
    info = _check_regular(source) if isinstance(source, str) else None
    return PreparedAudio(pcm16(source, span, max_seconds, first_seconds, checked=True), audio_identity(source, span, info)).encoded()
