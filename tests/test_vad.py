"""VAD splitting on synthesized speech (tests/fixtures/vad/make_vad_speech.py) whose phrase times are known."""

import json
import time
from pathlib import Path

import numpy as np
import pytest

from lalmeval.media.audio import decode, to_pcm16
from lalmeval.data.vad import split_at_silences, speech_frames

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "vad"
RATE = 16000
PCM = to_pcm16(decode(str(FIXTURE / "speech.flac")))  # 39 s, resampled from 8 kHz like a phone call
PHRASE_SECONDS = [(p["start"], p["end"]) for p in json.loads((FIXTURE / "phrases.json").read_text())["phrases"]]
PHRASES = [(round(start * RATE), round(end * RATE)) for start, end in PHRASE_SECONDS]


def noisy(pcm: np.ndarray, level: float) -> np.ndarray:
    rng = np.random.default_rng(7)
    return np.clip(pcm + rng.normal(0, level, len(pcm)), -32768, 32767).astype(np.int16)


def assert_covers(ranges, length, max_samples):
    assert ranges[0][0] == 0 and ranges[-1][1] == length
    assert all(a == prev_end for (a, _), (_, prev_end) in zip(ranges[1:], ranges))
    assert all(0 < b - a <= max_samples for a, b in ranges)


@pytest.mark.parametrize("max_seconds", [30.0, 10.0, 5.0, 4.0])
@pytest.mark.parametrize("noise", [0.0, 150.0, 600.0])
def test_vad_never_cuts_inside_a_word(max_seconds, noise):
    pcm = noisy(PCM, noise) if noise else PCM
    split = split_at_silences(pcm, RATE, max_seconds)
    assert_covers(split.ranges, len(pcm), int(max_seconds * RATE))
    cuts = [end for _, end in split.ranges[:-1]]
    assert len(cuts) >= 1 and split.hard_cuts == []
    for cut in cuts:
        # no phrase (words spoken in one breath) contains the cut ...
        assert not any(start <= cut <= end for start, end in PHRASES), f"cut at {cut / RATE:.2f} s splits a phrase"
        # ... and the clean signal around it is silent
        assert np.abs(PCM[cut - 160 : cut + 160].astype(np.int32)).max() < 300


def arrange(*parts):
    """Concatenate fixture phrases (ints: their index) and pauses (floats: seconds); return audio and pause ranges."""
    pieces, pauses, position = [], [], 0
    for part in parts:
        if isinstance(part, int):
            start, end = PHRASES[part]
            piece = PCM[start:end]
        else:
            piece = np.zeros(int(part * RATE), dtype=np.int16)
            pauses.append((position, position + len(piece)))
        pieces.append(piece)
        position += len(piece)
    return np.concatenate(pieces), pauses


def test_cut_goes_in_the_longest_silence_before_the_limit():
    pcm, (short_a, long_b, short_c, _) = arrange(0, 0.35, 1, 1.0, 2, 0.35, 3, 0.35, 4)
    assert short_c[1] < 9 * RATE < pcm.size and long_b[0] > 4.5 * RATE
    split = split_at_silences(pcm, RATE, 9.0, search_seconds=4.5)
    first_cut = split.ranges[0][1]
    assert long_b[0] < first_cut < long_b[1]


def test_a_silence_near_the_limit_wins_over_a_longer_one_far_from_it():
    pcm, (short_a, long_b, short_c, _) = arrange(0, 0.35, 1, 1.0, 2, 0.35, 3, 0.35, 4)
    split = split_at_silences(pcm, RATE, 9.0, search_seconds=1.5)
    first_cut = split.ranges[0][1]
    assert short_c[0] < first_cut < short_c[1]


def test_speech_without_any_silence_is_cut_hard_and_reported():
    noise = np.random.default_rng(0).normal(0, 3000, 5 * RATE).astype(np.int16)
    assert speech_frames(noise, RATE).all()
    split = split_at_silences(noise, RATE, 2.0)
    assert split.ranges == [(0, 2 * RATE), (2 * RATE, 4 * RATE), (4 * RATE, 5 * RATE)]
    assert split.hard_cuts == [2 * RATE, 4 * RATE]


def test_a_clip_within_the_limit_is_one_piece():
    assert split_at_silences(PCM, RATE, 60.0).ranges == [(0, len(PCM))]


def test_eight_khz_audio_is_split_too():
    pcm8 = to_pcm16(decode(str(FIXTURE / "speech.flac"), target_rate=8000))
    split = split_at_silences(pcm8, 8000, 10.0)
    assert_covers(split.ranges, len(pcm8), 10 * 8000)
    cuts = [end / 8000 for _, end in split.ranges[:-1]]
    assert cuts and not any(start <= cut <= end for cut in cuts for start, end in PHRASE_SECONDS)


def test_thirty_minutes_split_in_well_under_a_second_per_minute():
    long = np.tile(PCM, 46)  # 30 minutes
    started = time.perf_counter()
    split = split_at_silences(long, RATE, 30.0)
    assert time.perf_counter() - started < 10.0
    assert_covers(split.ranges, len(long), 30 * RATE)


@pytest.mark.parametrize("pcm,rate,reason", [
    (PCM, 22050, "sample rate"),
    (PCM.astype(np.float32), RATE, "16-bit mono"),
])
def test_audio_the_vad_cannot_read_is_refused(pcm, rate, reason):
    with pytest.raises(ValueError, match=reason):
        split_at_silences(np.concatenate([pcm] * 2), rate, 30.0)
