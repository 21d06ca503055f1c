"""Reading a span of a long recording: only those frames, stereo mixed to mono, clear errors outside the file."""

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from lalmeval.media.audio import AudioError, decode, prepare


def _ramp_16k(path: Path, seconds: float = 3.0) -> np.ndarray:
    """A 16-bit 16 kHz mono file whose every sample is distinct, so a misplaced span shows."""
    pcm = (np.arange(int(seconds * 16000)) % 30000 - 15000).astype(np.int16)
    sf.write(path, pcm, 16000, subtype="PCM_16")
    return pcm


def test_prepare_span_returns_exactly_the_frames_of_the_span(tmp_path):
    pcm = _ramp_16k(tmp_path / "ramp.wav")
    prepared = prepare(str(tmp_path / "ramp.wav"), span=(1.25, 2.0))
    assert np.array_equal(prepared.pcm, pcm[20000:32000])


def test_span_of_embedded_bytes_matches_span_of_the_file(tmp_path):
    _ramp_16k(tmp_path / "ramp.wav")
    data = (tmp_path / "ramp.wav").read_bytes()
    assert np.array_equal(prepare(data, span=(0.5, 1.0)).pcm, prepare(str(tmp_path / "ramp.wav"), span=(0.5, 1.0)).pcm)


def test_stereo_span_is_mixed_to_mono_and_resampled_to_16k(tmp_path):
    rate = 8000
    t = np.arange(4 * rate) / rate
    left, right = 0.4 * np.sin(2 * np.pi * 300 * t), 0.2 * np.sin(2 * np.pi * 300 * t)
    sf.write(tmp_path / "call.wav", np.stack([left, right], axis=1), rate, subtype="PCM_16")
    mono = decode(str(tmp_path / "call.wav"), span=(1.0, 3.0))
    assert len(mono) == 2 * 16000
    # Away from the edges the resampled mix is the mean of the channels: a 0.3-amplitude sine.
    assert np.max(np.abs(mono[1000:-1000])) == pytest.approx(0.3, abs=0.01)


def test_span_of_a_flac_file_equals_the_same_samples_of_the_whole_file(tmp_path):
    pcm = _ramp_16k(tmp_path / "ramp.flac")
    assert np.array_equal(prepare(str(tmp_path / "ramp.flac"), span=(2.0, 2.5)).pcm, pcm[32000:40000])


@pytest.mark.parametrize("span,reason", [
    ((2.5, 3.5), "ends after the audio (3.000 s)"),
    ((3.5, 4.0), "starts after the end of the audio (3.000 s)"),
    ((2.0, 1.0), "invalid span 2.000-1.000 s"),
    ((-1.0, 1.0), "invalid span -1.000-1.000 s"),
])
def test_span_outside_the_file_is_an_audio_error_with_its_reason(tmp_path, span, reason):
    _ramp_16k(tmp_path / "ramp.wav")
    with pytest.raises(AudioError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        prepare(str(tmp_path / "ramp.wav"), span=span)


def test_without_span_the_whole_clip_is_read(tmp_path):
    pcm = _ramp_16k(tmp_path / "ramp.wav")
    assert np.array_equal(prepare(str(tmp_path / "ramp.wav")).pcm, pcm)
