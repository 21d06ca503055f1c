"""Audio libsndfile does not read — AAC in m4a/mp4, Opus in WebM, anything else in a container FFmpeg
knows — opened with PyAV and read like a soundfile.SoundFile: float32 frames, a block at a time.

lalmeval.media.audio tries libsndfile first (WAV, FLAC, MP3, Ogg Vorbis/Opus, ...) and comes here only
when libsndfile does not recognise the format, so the same clip always decodes the same way. A
container's header gives its length only roughly (an MP3's from its bitrate, a WebM written live not
at all): it is a hint for the length limit and for `length_filter`, never a bound on what is read.
"""

from __future__ import annotations

import io
from collections import deque
from typing import Any, BinaryIO, Optional, Union

import numpy as np

# FFmpeg demuxers of self-contained media files. A playlist (hls), a concat list or an image sequence
# would make FFmpeg open the files or URLs it names, around the folders a dataset may read
# (lalmeval.data.confine), so every other demuxer is refused before the file is probed.
DEMUXERS = ("mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,ogg,mp3,aac,flac,wav,w64,aiff,caf,amr,amrnb,amrwb,asf,ac3,eac3,"
            "dts,wv,ape,tta,au,avi,flv,mpegts,mpeg,mpc,mpc8,voc,wsaud,xwma,loas,latm,oma,rm,nut,mxf,dv,spdif,ircam,sox")
PREROLL = 0.5  # seconds decoded before a seek target and dropped: a lossy decoder's first frames after a seek are not the clip's


class ContainerError(ValueError):
    """A clip FFmpeg cannot open or decode; the message says why."""


def _reason(exc: BaseException) -> str:
    """FFmpeg's own words, without the errno and the function name PyAV adds."""
    text = getattr(exc, "strerror", None) or str(exc)
    return str(text).strip() or type(exc).__name__


class AvClip:
    """The first audio stream of a container, read as float32 (frames, channels) at its own rate.

    `frames` is the soundfile-style count (unknown: a container's header is no exact count);
    `header_frames` is the header's estimate, or None when it gives none."""

    subtype = None  # never "ready" 16-bit PCM: decoded samples are always converted

    def __init__(self, source: Union[bytes, str], unknown: int):
        import av

        self.frames, self._av = unknown, av
        self._handle: BinaryIO = io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        context = self._stream.codec_context
        self.samplerate, self.channels = int(context.sample_rate or 0), int(context.channels or 0)
        if self.channels <= 0:
            raise ContainerError("the audio stream has no channels")
        seconds = self._header_seconds()
        self.header_frames = round(seconds * self.samplerate) if seconds and self.samplerate > 0 else None

    def _open(self) -> None:
        self._handle.seek(0)
        try:
            self._container: Any = self._av.open(self._handle, options={"format_whitelist": DEMUXERS})
        except self._av.ArgumentError:  # what FFmpeg says of a demuxer outside the whitelist
            raise ContainerError("not a media file FFmpeg may open here: playlists and lists of other files are refused") from None
        except self._av.FFmpegError as exc:
            raise ContainerError(_reason(exc)) from None
        if not self._container.streams.audio:
            raise ContainerError(f"no audio stream in the {self._container.format.name.split(',')[0]} container")
        self._stream = self._container.streams.audio[0]
        self._decoded = self._container.decode(self._stream)
        self._pending: deque[np.ndarray] = deque()  # decoded (channels, n) float32 arrays not yet read
        self._resampler: Any = None

    def _header_seconds(self) -> Optional[float]:
        stream = self._stream
        if stream.duration is not None and stream.time_base:
            return float(stream.duration * stream.time_base)
        if self._container.duration is not None:
            return self._container.duration / self._av.time_base
        return None

    def _start_seconds(self) -> float:
        stream = self._stream
        return float(stream.start_time * stream.time_base) if stream.start_time is not None and stream.time_base else 0.0

    def _next(self) -> Optional[tuple[np.ndarray, Optional[float]]]:
        """The next decoded frame as (channels, n) float32 and its time in seconds from the stream's
        start (None when it has no timestamp); None at the end."""
        try:
            frame = next(self._decoded, None)
            if frame is None:
                return None
            if self._resampler is None:  # every frame in one sample format and layout, at the stream's rate
                self._resampler = self._av.AudioResampler(format="fltp", layout=self._stream.codec_context.layout, rate=self.samplerate)
            when = None if frame.time is None else frame.time - self._start_seconds()
            parts = [f.to_ndarray() for f in self._resampler.resample(frame)]
        except self._av.FFmpegError as exc:
            raise ContainerError(_reason(exc)) from None
        data = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0] if parts else np.zeros((self.channels, 0), np.float32)
        return data.astype(np.float32, copy=False), when

    def seek(self, frame: int) -> None:
        """Position the reader at `frame` (at the clip's own rate): seek a little before it, decode, drop up to it."""
        target = frame / self.samplerate
        try:
            self._container.seek(int((self._start_seconds() + max(0.0, target - PREROLL)) / self._stream.time_base),
                                 stream=self._stream, backward=True)
        except self._av.FFmpegError:
            self._open()  # not seekable: decode from the start
        self._decoded, self._pending, self._resampler = self._container.decode(self._stream), deque(), None
        position: Optional[int] = None
        while (item := self._next()) is not None:
            data, when = item
            if position is None:
                if when is None:  # no timestamps to say where decoding resumed: count from the start instead
                    self._open()
                    self._skip(frame)
                    return
                position = round(when * self.samplerate)
            if position + data.shape[1] > frame:
                self._pending.append(data[:, max(0, frame - position):])
                return
            position += data.shape[1]

    def _skip(self, frames: int) -> None:
        while frames > 0 and (item := self._next()) is not None:
            data = item[0]
            if data.shape[1] > frames:
                self._pending.append(data[:, frames:])
            frames -= data.shape[1]

    def read(self, frames: int) -> np.ndarray:
        """Up to `frames` frames as float32 (frames, channels); fewer only at the end of the stream."""
        have = sum(p.shape[1] for p in self._pending)
        while have < frames and (item := self._next()) is not None:
            self._pending.append(item[0])
            have += item[0].shape[1]
        out, filled = np.empty((self.channels, min(frames, have)), np.float32), 0
        while filled < out.shape[1]:
            piece = self._pending.popleft()
            take = min(piece.shape[1], out.shape[1] - filled)
            if piece.shape[0] != self.channels:
                raise ContainerError(f"the audio stream changed from {self.channels} to {piece.shape[0]} channels")
            out[:, filled : filled + take] = piece[:, :take]
            if take < piece.shape[1]:
                self._pending.appendleft(piece[:, take:])
            filled += take
        return out.T

    def close(self) -> None:
        container = getattr(self, "_container", None)
        if container is not None:
            container.close()
        self._handle.close()

    def __enter__(self) -> "AvClip":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
