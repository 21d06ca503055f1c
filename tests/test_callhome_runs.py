"""CallHome end to end: a private folder of CHAT transcripts and calls, evaluated through a real run."""

import json
import shutil
from pathlib import Path

import jiwer
import pytest
from whisper_normalizer.english import EnglishTextNormalizer

from lalmeval.data.callhome import read_callhome
from lalmeval.metrics.cpwer import cp_word_errors
from lalmeval.metrics.diarization import parse_speakers
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import model

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "callhome"
normalize = EnglishTextNormalizer()
REPLY = "hello Maria\nyes I am good"
DIARIZED = "A: hello is that you\nB: yeah it's me\nA: I went downtown"


def callhome(ws, **spec):
    folder = Path(shutil.copytree(FIXTURE, ws.root / "private" / "callhome" / "eng", ignore=shutil.ignore_patterns("*.py", "*.json")))
    ws.runspec("callhome", "callhome", {"ch": {"hf_repo": str(folder), "format": "callhome", "language": "english", "id_column": "id", **spec}})
    return folder


def test_utterance_word_error_rate_equals_jiwer_on_the_cleaned_references(ws):
    folder = callhome(ws)
    _, rows = read_callhome(folder)
    rows = list(rows)
    with ScriptedEndpoint(lambda seen, n: REPLY) as ep:
        ws.config([model(ep.url)], [["ch", "word_error_rate"]])
        result = ws.run()
        lengths = sorted(round(s.audio_seconds[0], 2) for s in ep.requests)
    assert lengths == sorted(round(r["audio"]["end"] - r["audio"]["start"], 2) for r in rows)  # each utterance's span, cut from its call
    refs = [normalize(r["reference"]) for r in rows]
    expected = jiwer.wer(refs, [normalize(REPLY)] * len(refs))
    score = result.scores[0]
    assert score.num_samples == len(rows) and score.num_failed == 0
    assert score.details["corpus_wer"] == pytest.approx(expected, abs=1e-9)


def test_speaker_diarization_on_whole_call_windows_equals_the_corpus_cpwer_of_the_transcripts(ws):
    folder = callhome(ws, segment="turns", window_s=3600)
    _, rows = read_callhome(folder, "turns", 3600)
    rows = list(rows)
    with ScriptedEndpoint(lambda seen, n: DIARIZED) as ep:
        ws.config([model(ep.url)], [["ch", "speaker_diarization"]])
        result = ws.run()
        assert len(ep.requests) == len(rows) == 2  # one window per whole call

    def by_speaker(text):
        out = {}
        for speaker, line in parse_speakers(text):
            words = normalize(line)
            if words:
                out.setdefault(speaker, []).extend(words.split())
        return out

    rates = [cp_word_errors(by_speaker(r["reference"]), by_speaker(DIARIZED)) for r in rows]
    expected = sum(r.errors for r in rates) / sum(r.length for r in rates)
    score = result.scores[0]
    assert score.score == pytest.approx(100 * expected, abs=1e-9)
    assert score.details["cpwer"] == pytest.approx(expected, abs=1e-9)


def test_missing_private_callhome_data_says_where_to_put_it_and_the_rest_runs(ws, capsys):
    ws.runspec("callhome", "callhome", {"ch": {"hf_repo": str(ws.root / "private" / "callhome" / "eng"), "format": "callhome", "language": "english"}})
    rows = [{"id": "q0", "question": "question", "reference": "answer"}]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "textual_input_column": "question", "audio_column": None}})
    with ScriptedEndpoint(lambda seen, n: "answer") as ep:
        config = ws.config([model(ep.url)], [["ch", "word_error_rate"], ["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        from lalmeval.cli.commands import main

        code = main(["run", "--config", str(config), "--run-id", "t"])
        assert len(ep.requests) == 1
    err = capsys.readouterr().err
    assert code == 2
    assert "dataset 'ch' was not evaluated:" in err and "transcripts" in err and "audio" in err
    scores = {s["dataset"]: s for s in json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"]}
    assert scores["qs"]["score"] == 100.0 and scores["ch"]["score"] is None and "error" in scores["ch"]["details"]
