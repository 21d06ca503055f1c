"""Compressed clips for tests, written with PyAV (the encoders its wheels carry: AAC, Opus, MP3), so no
ffmpeg program is needed: m4a, mp4, webm, Opus and MP3 files of the shipped espeak-ng speech or of silence."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import soundfile as sf

from tests.support.workspace import DEMO, demo_rows

# suffix → (encoder, sample rate): what phones and browsers record, and what libsndfile cannot read (m4a, mp4, webm)
CODECS = {".flac": ("flac", 16000), ".m4a": ("aac", 44100), ".mp4": ("aac", 22050), ".webm": ("libopus", 48000), ".opus": ("libopus", 48000), ".mp3": ("libmp3lame", 44100)}


def encode(pcm: np.ndarray, rate: int, path: Path, codec: Optional[str] = None, out_rate: Optional[int] = None,
           live: bool = False) -> Path:
    """Write int16 `pcm` ((n,) mono or (n, 2) stereo at `rate`) as `path`, its container chosen by the suffix.
    `live`: a WebM as a browser's MediaRecorder writes it, with no duration in its header."""
    import av

    default_codec, default_rate = CODECS[path.suffix]
    codec, out_rate = codec or default_codec, out_rate or default_rate
    layout = "stereo" if pcm.ndim == 2 else "mono"
    planar = np.ascontiguousarray(pcm.T if pcm.ndim == 2 else pcm[None, :], dtype=np.int16)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w", options={"live": "1"} if live else {}) as out:
        stream = out.add_stream(codec, rate=out_rate, layout=layout)
        resampler = av.AudioResampler(format=stream.codec_context.format, layout=layout, rate=out_rate)
        step = rate * 10
        for start in range(0, planar.shape[1], step):
            frame = av.AudioFrame.from_ndarray(planar[:, start : start + step], format="s16p", layout=layout)
            frame.sample_rate = rate
            for piece in resampler.resample(frame):
                out.mux(stream.encode(piece))
        for piece in resampler.resample(None):
            out.mux(stream.encode(piece))
        out.mux(stream.encode(None))
    return path


def speech(index: int = 0) -> tuple[np.ndarray, dict]:
    """A shipped demo clip (espeak-ng speech, 16 kHz int16) and its row."""
    row = demo_rows()[index]
    pcm, _ = sf.read(DEMO / row["audio"], dtype="int16")
    return pcm, row


def speech_clip(path: Path, index: int = 0, **kwargs) -> Path:
    """The demo clip `index` encoded as `path` (its suffix picks the container and codec)."""
    return encode(speech(index)[0], 16000, path, **kwargs)


def silence(path: Path, seconds: float, **kwargs) -> Path:
    """`seconds` of silence encoded as `path`."""
    return encode(np.zeros(int(seconds * 16000), np.int16), 16000, path, **kwargs)
