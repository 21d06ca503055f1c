"""Clips libsndfile cannot read — AAC in m4a and mp4, Opus in WebM — decoded through PyAV block by
block, resampled to 16 kHz mono, bounded by max_audio_seconds like any other clip; Ogg Opus and MP3
still go through libsndfile. The files are encoded here with PyAV from the shipped espeak-ng speech."""

import json
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from lalmeval.config.schema import Filters
from lalmeval.data.source import iter_samples, open_source
from lalmeval.media.audio import AudioError, decode, duration, prepare
from tests.support.encode import encode, silence, speech, speech_clip
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import model

NOT_FOR_LIBSNDFILE = [".m4a", ".mp4", ".webm"]
ALL = NOT_FOR_LIBSNDFILE + [".opus", ".mp3"]


def aligned_correlation(decoded, original, most_lag=2000):
    """Correlation of `decoded` with `original` at the lag that matches them best (encoders add a few ms of delay)."""
    n = min(len(decoded), len(original)) - most_lag
    lag = max(range(most_lag), key=lambda k: float(np.dot(decoded[k : k + n], original[:n])))
    return float(np.corrcoef(decoded[lag : lag + n], original[:n])[0, 1])


@pytest.mark.parametrize("suffix", NOT_FOR_LIBSNDFILE)
def test_libsndfile_does_not_read_these_containers(tmp_path, suffix):
    """What the decoder below stands in for: soundfile alone says 'Format not recognised'."""
    with pytest.raises(sf.LibsndfileError, match="Format not recognised"):
        sf.info(str(speech_clip(tmp_path / f"clip{suffix}")))


@pytest.mark.parametrize("suffix", ALL)
def test_a_compressed_clip_decodes_to_the_speech_it_holds_at_16k_mono(tmp_path, suffix):
    original, _ = speech(0)
    path = speech_clip(tmp_path / f"clip{suffix}")
    clip = prepare(str(path))
    assert clip.pcm.dtype == np.int16
    assert abs(clip.seconds - len(original) / 16000) < 0.1  # an encoder's priming and padding: a few ms
    assert aligned_correlation(clip.pcm / 32768.0, original / 32768.0) > 0.95
    assert prepare(path.read_bytes()).pcm.tolist() == clip.pcm.tolist()  # embedded bytes decode as the file does


def test_a_stereo_m4a_is_mixed_to_the_mean_of_its_channels(tmp_path):
    original, _ = speech(1)
    path = encode(np.stack([original, np.zeros_like(original)], axis=1), 16000, tmp_path / "stereo.m4a")
    mono = decode(str(path))
    assert aligned_correlation(mono, original / 32768.0) > 0.95
    assert np.sqrt(np.mean(mono**2)) == pytest.approx(np.sqrt(np.mean((original / 65536.0) ** 2)), rel=0.1)  # half of the left channel


@pytest.mark.parametrize("suffix,exact", [(".webm", True), (".m4a", False)])
def test_a_span_of_a_compressed_clip_is_the_same_stretch_of_the_whole(tmp_path, suffix, exact):
    """A span seeks, decodes half a second before it and drops that, so it holds the samples of the whole
    clip's decode (Opus to float precision; AAC's noise substitution draws new noise after a seek)."""
    path = speech_clip(tmp_path / f"clip{suffix}", index=2)
    rate = 48000 if suffix == ".webm" else 44100
    whole = decode(str(path), target_rate=rate)
    part = decode(str(path), target_rate=rate, span=(0.9, 1.6))
    expected = whole[round(0.9 * rate) : round(0.9 * rate) + len(part)]
    assert len(part) == round(0.7 * rate)
    if exact:
        assert np.max(np.abs(part - expected)) < 1e-6
    else:
        assert np.corrcoef(part, expected)[0, 1] > 0.99


def test_a_compressed_clip_over_max_audio_seconds_fails_from_its_header_before_decoding(tmp_path):
    path = silence(tmp_path / "long.m4a", 180)
    assert duration(str(path)) == pytest.approx(180, abs=0.1)
    tracemalloc.start()
    try:
        with pytest.raises(AudioError, match=r"max_audio_seconds \(60 s\): its header says 180\.\d s"):
            prepare(str(path), max_seconds=60)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    assert peak < 2


def test_a_webm_without_a_duration_stops_decoding_at_the_limit(tmp_path):
    """A browser's recording has no length in its header: decoding stops just past the limit, holding
    about the limit and a block (three minutes at 48 kHz would be 35 MB of float)."""
    path = silence(tmp_path / "recorded.webm", 180, live=True)
    assert duration(str(path)) is None
    tracemalloc.start()
    try:
        with pytest.raises(AudioError, match=r"max_audio_seconds \(30 s\): decoding went past it"):
            prepare(str(path), max_seconds=30)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    assert peak < 12
    assert prepare(str(path), max_seconds=200).seconds == pytest.approx(180, abs=0.05)
    assert prepare(str(path), max_seconds=30, first_seconds=20).seconds == pytest.approx(20.1, abs=0.01)  # truncation reads only its start


def test_a_file_neither_decoder_reads_fails_with_both_reasons(tmp_path):
    path = tmp_path / "clip.m4a"
    path.write_bytes(b"id,audio\n1,x.wav\n")
    reason = f"unreadable audio: neither libsndfile (Format not recognised) nor FFmpeg (Invalid data found when processing input) reads '{path}'"
    with pytest.raises(AudioError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        prepare(str(path))
    with pytest.raises(AudioError, match=r"\) reads its bytes$"):
        prepare(path.read_bytes())
    assert duration(str(path)) is None


def test_a_playlist_is_refused_so_ffmpeg_never_opens_the_files_it_names(tmp_path):
    """An HLS playlist in the data's folder naming a clip elsewhere: FFmpeg would open and decode that
    clip, around the folders a dataset may read (lalmeval.data.confine). Only self-contained files open."""
    elsewhere = speech_clip(tmp_path / "elsewhere.mp3")
    (tmp_path / "data").mkdir()
    playlist = tmp_path / "data" / "clip.m3u8"
    playlist.write_text(f"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:2.0,\nfile:{elsewhere}\n#EXT-X-ENDLIST\n")
    with pytest.raises(AudioError, match="playlists and lists of other files are refused"):
        prepare(str(playlist))
    assert duration(str(playlist)) is None


def test_a_video_without_an_audio_stream_says_so(tmp_path):
    import av

    path = tmp_path / "silent_film.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=5)
        stream.width, stream.height = 32, 32
        for _ in range(3):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")))
        out.mux(stream.encode(None))
    with pytest.raises(AudioError, match="no audio stream in the mov container"):
        prepare(str(path))


def workspace_clips(ws):
    """The first five demo clips as m4a, mp4, webm, opus and mp3 files beside a jsonl naming them."""
    (ws.root / "data" / "audio").mkdir(parents=True)
    rows = []
    for index, suffix in enumerate(ALL):
        _, row = speech(index)
        speech_clip(ws.root / "data" / "audio" / f"{row['id']}{suffix}", index=index)
        rows.append({"id": row["id"], "audio": f"audio/{row['id']}{suffix}", "reference": row["reference"]})
    return rows


def test_length_filter_reads_compressed_clips_lengths_from_their_headers(ws):
    rows = workspace_clips(ws)
    ws.runspec("asr", "phone", {"phone": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    ws.config([model("http://127.0.0.1:9/v1")], [["phone", "word_error_rate"]])
    dataset = ws.plan().catalog.datasets["phone"]
    lengths = {r["id"]: duration(str(ws.root / "data" / r["audio"])) for r in rows}
    assert all(length is not None for length in lengths.values())
    low, high = sorted(lengths.values())[1] - 0.01, sorted(lengths.values())[3] + 0.01
    kept = [s.id for s in open_source(dataset, Filters(length_filter=[low, high])).samples()]
    assert kept == [i for i, length in lengths.items() if low <= length <= high] and len(kept) == 3


def test_a_run_sends_every_container_as_16k_wav_and_scores_them(ws):
    rows = workspace_clips(ws)
    ws.runspec("asr", "phone", {"phone": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    with ScriptedEndpoint(lambda seen, n: "hello") as ep:
        ws.config([model(ep.url)], [["phone", "word_error_rate"]])
        result = ws.run()
        seconds = sorted(round(s.audio_seconds[0], 1) for s in ep.requests)
    records = ws.records("phone", "m")
    assert len(records) == 5 and all(r["error"] is None for r in records), [r["error"] for r in records]
    assert seconds == sorted(round(prepare(str(ws.root / "data" / r["audio"])).seconds, 1) for r in rows)
    assert result.complete and result.scores[0].num_samples == 5 and result.scores[0].num_failed == 0


def test_embedded_m4a_bytes_in_a_parquet_are_decoded(ws):
    (ws.root / "data").mkdir()
    original, row = speech(3)
    data = speech_clip(ws.root / "clip.webm", index=3).read_bytes()
    table = pa.Table.from_pylist([{"id": row["id"], "audio": {"bytes": data, "path": "clip.webm"}, "reference": row["reference"]}])
    pq.write_table(table, ws.root / "data" / "set.parquet")
    ws.runspec("asr", "phone", {"phone": {"hf_repo": "data/set.parquet", "id_column": "id"}})
    ws.config([model("http://127.0.0.1:9/v1")], [["phone", "word_error_rate"]])
    sample = next(iter_samples(ws.plan().catalog.datasets["phone"]))
    assert aligned_correlation(decode(sample.audio[0].source), original / 32768.0) > 0.95
    assert json.dumps(sample.reference) == json.dumps(row["reference"])


def validate(ws):
    from lalmeval.cli.commands import main

    return main(["validate", "--config", str(ws.root / "config.yaml")])


def test_validate_finds_the_clip_a_run_cannot_decode_and_names_it_with_the_runs_reason(ws, capsys):
    """validate opens every selected clip as a run does and decodes its first second: a clip neither
    decoder reads is an error naming the sample, with the reason the run then records for it."""
    rows = workspace_clips(ws)
    (ws.root / "data" / "audio" / "broken.m4a").write_bytes(b"\x00\x00\x00\x18ftypM4A " + bytes(64))  # a header and no audio
    rows.append({"id": "broken", "audio": "audio/broken.m4a", "reference": "x"})
    ws.runspec("asr", "phone", {"phone": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    with ScriptedEndpoint(lambda seen, n: "hello") as ep:
        ws.config([model(ep.url)], [["phone", "word_error_rate"]])
        assert validate(ws) == 2
        err = capsys.readouterr().err
        ws.run()
    lines = [line for line in err.splitlines() if "would fail" in line]
    assert len(lines) == 1 and lines[0].startswith("error: dataset 'phone' (") and "sample 'broken' would fail: audio: unreadable audio: " in lines[0]
    recorded = {r["id"]: r["error"] for r in ws.records("phone", "m")}
    assert recorded["broken"] == lines[0].split("would fail: ", 1)[1]
    assert all(error is None for i, error in recorded.items() if i != "broken") and len(ep.requests) == 5


def test_validate_checks_max_audio_seconds_against_headers_unless_every_model_truncates(ws, capsys):
    rows = workspace_clips(ws)
    silence(ws.root / "data" / "audio" / "long.webm", 90)
    rows.append({"id": "long", "audio": "audio/long.webm", "reference": "x"})
    ws.runspec("asr", "phone", {"phone": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    ws.config([model("http://127.0.0.1:9/v1")], [["phone", "word_error_rate"]], max_audio_seconds=60)
    assert validate(ws) == 2
    assert "sample 'long' would fail: audio: clip longer than max_audio_seconds (60 s): its header says 90.0 s" in capsys.readouterr().err
    ws.config([model("http://127.0.0.1:9/v1", long_audio="truncate", chunk_size=30)], [["phone", "word_error_rate"]], max_audio_seconds=60)
    assert validate(ws) == 0
    assert "data of phone: OK" in capsys.readouterr().out
