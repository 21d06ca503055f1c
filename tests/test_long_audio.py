"""long_audio: audio longer than chunk_size is cut at fixed points, truncated, or cut in silences (vad)."""

import json
import shutil
from pathlib import Path

import pytest
import soundfile as sf

from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import model

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "vad"
PHRASES = [(p["start"], p["end"]) for p in json.loads((FIXTURE / "phrases.json").read_text())["phrases"]]
SECONDS = sf.info(str(FIXTURE / "speech.flac")).duration


def long_clip(ws, mode):
    (ws.root / "data").mkdir(exist_ok=True)
    shutil.copy(FIXTURE / "speech.flac", ws.root / "data" / "speech.flac")
    rows = [{"id": "talk", "audio": "speech.flac", "reference": " ".join(json.loads((FIXTURE / "phrases.json").read_text())["phrases"][i]["words"] for i in range(len(PHRASES)))}]
    ws.runspec("asr", "long", {"talk": {"hf_repo": ws.jsonl(rows), "id_column": "id", "long_audio": mode}})


def piece_lengths(ws, mode, chunk_size=10.0):
    long_clip(ws, mode)
    with ScriptedEndpoint(lambda seen, n: f"piece {round(seen.audio_seconds[0], 3)}") as ep:
        ws.config([model(ep.url, chunk_size=chunk_size)], [["talk", "word_error_rate"]])
        ws.run()
        lengths = [seen.audio_seconds[0] for seen in ep.requests]
    record = ws.records("talk", "m")[0]
    order = [float(word) for word in record["reply"].split() if word != "piece"]  # outputs joined in clip order
    return lengths, order, record


def cuts_of(order):
    cuts, position = [], 0.0
    for length in order[:-1]:
        position += length
        cuts.append(position)
    return cuts


def inside_a_phrase(cut):
    return any(start + 0.02 < cut < end - 0.02 for start, end in PHRASES)


def test_vad_never_cuts_inside_a_word_and_joins_the_outputs_in_order(ws):
    lengths, order, record = piece_lengths(ws, "vad")
    assert record["chunks"] == len(lengths) >= 4 and max(lengths) <= 10.0 + 1e-3
    assert sum(order) == pytest.approx(SECONDS, abs=0.01)
    assert not [cut for cut in cuts_of(order) if inside_a_phrase(cut)]


def test_fixed_chunks_do_cut_through_words_on_the_same_speech(ws):
    _, order, _ = piece_lengths(ws, "chunk")
    assert [cut for cut in cuts_of(order) if inside_a_phrase(cut)], "fixed 10 s cuts should land in speech here"


def test_truncate_sends_only_the_first_chunk_size_seconds(ws):
    lengths, _, record = piece_lengths(ws, "truncate")
    assert lengths == [pytest.approx(10.0, abs=1e-3)] and record["chunks"] == 1


@pytest.mark.parametrize("shape", ["two turns, one clip", "one turn, two clips"])
def test_chunk_size_bounds_every_request_of_a_dialogue_or_a_multi_clip_sample(ws, shape):
    """Several clips, or one clip sent again with every turn, go into one request each: with
    `long_audio: truncate` every clip is cut to chunk_size; with `chunk` (or vad) such a sample
    cannot be split into requests, so it fails with the reason instead of sending too much audio."""
    from tests.support.workspace import demo_rows

    rows = ws.copy_demo_audio(demo_rows(2))
    clip = rows[0]["audio"]
    if shape == "two turns, one clip":
        row = {"id": "d", "turns": ["What was said?", "Say it again."], "audio": clip}
        spec = {"turns_column": "turns"}
    else:
        row = {"id": "d", "audio": [clip, rows[1]["audio"]], "question": "Which is longer?"}
        spec = {"textual_input_column": "question"}
    ws.runspec("chat", "mt", {"mt": {"hf_repo": ws.jsonl([row]), "id_column": "id", "target_column": None, **spec}})
    seconds = {}
    for mode in ("truncate", "chunk"):
        with ScriptedEndpoint(lambda seen, n: "ok") as ep:
            ws.config([model(ep.url, chunk_size=1, long_audio=mode)], [["mt", "word_error_rate"]], output_dir=str(ws.root / "runs"))
            ws.run(run_id=mode)
            seconds[mode] = [round(s, 2) for seen in ep.requests for s in seen.audio_seconds]
        record = ws.records("mt", "m", run_id=mode)[0]
        if mode == "chunk":
            assert record["error"].startswith("audio: a clip of") and "long_audio: truncate" in record["error"]
        else:
            assert record["error"] is None
    assert seconds["chunk"] == [] and seconds["truncate"] and max(seconds["truncate"]) <= 1.0
    assert len(seconds["truncate"]) == 2  # two requests of one clip, or one request of two clips
