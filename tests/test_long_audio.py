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
