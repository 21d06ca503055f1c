"""max_audio_seconds: a clip over the limit fails its sample, with a reason naming the limit, before
it is decoded whole; clips are decoded and resampled block by block, and a truncation decodes only
what it sends."""

import tracemalloc

import numpy as np
import pytest
import soundfile as sf

from lalmeval.media.audio import AudioError, prepare
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model


def silent_flac(path, minutes, rate=16000):
    """A FLAC of silence, written a minute at a time (three hours compress to about 550 KB)."""
    zeros = np.zeros(rate * 60, dtype=np.int16)
    with sf.SoundFile(str(path), "w", rate, 1, "PCM_16", format="FLAC") as out:
        for _ in range(minutes):
            out.write(zeros)


def without_length(path):
    """The FLAC with the total sample count of its header zeroed: 'unknown', as a streaming encoder writes it."""
    data = bytearray(path.read_bytes())
    assert data[:4] == b"fLaC"
    word = int.from_bytes(data[18:26], "big") & ~((1 << 36) - 1)  # the low 36 bits of STREAMINFO bytes 10-17
    data[18:26] = word.to_bytes(8, "big")
    path.write_bytes(bytes(data))


def traced_peak_mb(call):
    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return peak


@pytest.fixture(scope="module")
def three_hours(tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "three_hours.flac"
    silent_flac(path, 180)
    return path


def test_a_clip_over_max_audio_seconds_fails_before_it_is_decoded(three_hours):
    """Three hours of silence: 550 KB of FLAC, 330 MB as 16 kHz PCM, 660 MB as float. Its header says
    how long it is, so it fails at once, naming the limit, having decoded nothing."""
    assert three_hours.stat().st_size < 2_000_000

    def attempt():
        with pytest.raises(AudioError, match=r"max_audio_seconds \(3600 s\): its header says 10800.0 s"):
            prepare(str(three_hours), max_seconds=3600)

    assert traced_peak_mb(attempt) < 2


def test_a_clip_whose_header_has_no_length_stops_decoding_at_the_limit(tmp_path):
    """Ten minutes with no length in the header and a 60 s limit: decoding stops just past 60 s, so
    memory holds a minute and a block, never the ten minutes (38 MB as float)."""
    path = tmp_path / "no_length.flac"
    silent_flac(path, 10)
    without_length(path)
    assert sf.info(str(path)).frames > 10**15  # libsndfile's 'unknown'

    def attempt():
        with pytest.raises(AudioError, match=r"max_audio_seconds \(60 s\): decoding went past it"):
            prepare(str(path), max_seconds=60)

    assert traced_peak_mb(attempt) < 12
    assert prepare(str(path), max_seconds=900).seconds == 600.0  # within the limit it is read to its end


def test_truncation_decodes_only_the_first_chunk_size_seconds(three_hours):
    peak = traced_peak_mb(lambda: prepare(str(three_hours), max_seconds=3600, first_seconds=30))
    assert peak < 8
    clip = prepare(str(three_hours), max_seconds=3600, first_seconds=30)
    assert 30 <= clip.seconds < 31 and clip.chunks(30, "truncate")[0].seconds == 30


def test_decoding_in_blocks_gives_the_samples_of_decoding_whole(tmp_path):
    """A 50 s stereo clip at 44.1 kHz crosses block boundaries: the same 16 kHz samples as resampling it whole."""
    import soxr

    rng = np.random.default_rng(3)
    stereo = (rng.standard_normal((44100 * 50, 2)) * 0.1).astype(np.float32)
    sf.write(str(tmp_path / "long.wav"), stereo, 44100, subtype="FLOAT")
    whole = soxr.resample(stereo.mean(axis=1), 44100, 16000)
    expected = np.clip(np.rint(whole * 32768.0), -32768, 32767).astype(np.int16)
    assert np.array_equal(prepare(str(tmp_path / "long.wav")).pcm, expected)


def test_a_run_fails_only_the_clip_over_the_limit_with_its_reason(ws, tmp_path):
    rows = ws.copy_demo_audio(demo_rows(2))
    silent_flac(ws.root / "data" / "audio" / "long.flac", 3)
    rows.append({**rows[0], "id": "long", "audio": "audio/long.flac"})
    ws.runspec("asr", "clips", {"clips": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    with ScriptedEndpoint(lambda seen, n: "hello") as ep:
        ws.config([model(ep.url)], [["clips", "word_error_rate"]], max_audio_seconds=120)
        result = ws.run()
    records = {r["id"]: r for r in ws.records("clips", "m")}
    assert len(records) == 3 and len(ep.requests) == 2
    assert records["long"]["error"].startswith("audio: clip longer than max_audio_seconds (120 s): its header says 180.0 s")
    assert all(r["error"] is None for i, r in records.items() if i != "long")
    assert not result.complete and result.scores[0].num_samples == 3 and result.scores[0].num_failed == 1


def test_truncate_answers_a_clip_over_the_limit_from_its_start(ws):
    rows = ws.copy_demo_audio(demo_rows(1))
    silent_flac(ws.root / "data" / "audio" / "long.flac", 3)
    rows = [{**rows[0], "id": "long", "audio": "audio/long.flac"}]
    ws.runspec("asr", "clips", {"clips": {"hf_repo": ws.jsonl(rows), "id_column": "id", "long_audio": "truncate"}})
    with ScriptedEndpoint(lambda seen, n: "hello") as ep:
        ws.config([model(ep.url, chunk_size=20)], [["clips", "word_error_rate"]], max_audio_seconds=120)
        ws.run()
    assert [seen.audio_seconds for seen in ep.requests] == [[20.0]]
    assert ws.records("clips", "m")[0]["error"] is None
