"""Peer protocols beside careful and judge reading, end to end against scripted endpoints on 127.0.0.1: the main
number is the peer's (the reply as written), lalmeval's own careful number rides in details.lalmeval."""

import pytest

from tests.test_reading import TRANSCRIPTS
from tests.test_reading_runs import EMOTION, declare, judge_reader, replying, run_all
from tests.support.endpoint import ScriptedEndpoint

ENGLISH = TRANSCRIPTS["transcripts_en.jsonl"]


def test_a_peer_protocol_scores_wer_verbatim_with_the_careful_number_beside_it(ws):
    with ScriptedEndpoint(replying(ENGLISH)) as asr:
        specs = {**declare(ws, "asr", ENGLISH, language="english", metrics=["word_error_rate"]),
                 **declare(ws, "asr_peer", ENGLISH, language="english", metrics=["word_error_rate"], protocol="au_harness")}
        _, careful = run_all(ws, asr.url, specs, [["asr", "word_error_rate"], ["asr_peer", "word_error_rate"]], "a")
        _, verbatim = run_all(ws, asr.url, specs, [["asr", "word_error_rate"]], "b", reading="verbatim")
    peer = careful[("asr_peer", "word_error_rate")]
    assert "lalmeval" not in careful[("asr", "word_error_rate")]["details"]
    assert peer["score"] > careful[("asr", "word_error_rate")]["score"] + 20
    assert peer["details"]["lalmeval"]["score"] < peer["score"] - 20


@pytest.mark.parametrize("metric", ["word_error_rate", "bleu", "chrf"])
def test_judge_reading_under_a_peer_protocol_still_scores_every_sample(ws, metric):
    with ScriptedEndpoint(replying(ENGLISH)) as asr, ScriptedEndpoint(judge_reader) as judge:
        judge_props = {"judge_model": "reader", "judge_api_endpoint": judge.url, "judge_retry_attempts": 0}
        extra = {"target_language": "english"} if metric != "word_error_rate" else {}
        specs = declare(ws, "asr_peer", ENGLISH, language="english", metrics=[metric], protocol="au_harness", reading="judge", **extra)
        code, scores = run_all(ws, asr.url, specs, [["asr_peer", metric]], "j", judge_properties=judge_props)
    score = scores[("asr_peer", metric)]
    assert code == 0 and score["score"] is not None and score["num_samples"] == len(ENGLISH)
    assert score["details"]["lalmeval"]["score"] is not None


@pytest.mark.parametrize("protocol", ["au_harness", "lmms"])
def test_accuracy_under_a_peer_protocol_keeps_the_careful_number_beside_the_verbatim_one(ws, protocol):
    choices = EMOTION[0]["choices"]
    with ScriptedEndpoint(replying(EMOTION)) as emo:
        specs = {**declare(ws, "emotion", EMOTION, language="english", metrics=["accuracy"], choices=choices),
                 **declare(ws, "emotion_peer", EMOTION, language="english", metrics=["accuracy"], choices=choices, protocol=protocol)}
        code, scores = run_all(ws, emo.url, specs, [["emotion", "accuracy"], ["emotion_peer", "accuracy"]], "e")
    careful, peer = scores[("emotion", "accuracy")], scores[("emotion_peer", "accuracy")]
    assert "lalmeval" not in careful["details"]
    assert peer["details"]["reading"]["mode"] == "verbatim" and peer["score"] < careful["score"]
    assert peer["details"]["lalmeval"]["score"] == pytest.approx(careful["score"])
    assert peer["details"]["lalmeval"]["differs_by"].startswith("reading:")


def test_chrf_under_a_peer_protocol_keeps_the_careful_number_beside_the_verbatim_one(ws):
    with ScriptedEndpoint(replying(ENGLISH)) as ep:
        specs = {**declare(ws, "st", ENGLISH, language="english", target_language="english", metrics=["chrf"]),
                 **declare(ws, "st_peer", ENGLISH, language="english", target_language="english", metrics=["chrf"], protocol="au_harness")}
        _, scores = run_all(ws, ep.url, specs, [["st", "chrf"], ["st_peer", "chrf"]], "c")
    careful, peer = scores[("st", "chrf")], scores[("st_peer", "chrf")]
    assert "lalmeval" not in careful["details"]
    assert peer["details"]["reading"]["mode"] == "verbatim" and peer["score"] < careful["score"] - 5
    assert peer["details"]["lalmeval"]["score"] == pytest.approx(careful["score"])
    assert peer["details"]["lalmeval"]["differs_by"].startswith("reading:")


def test_accuracy_judged_under_a_peer_protocol_keeps_the_careful_number_and_names_the_judge_step(ws):
    from tests.test_reading_runs import GENDER

    with ScriptedEndpoint(replying(GENDER)) as ep, ScriptedEndpoint(judge_reader) as judge:
        props = {"judge_model": "reader", "judge_api_endpoint": judge.url, "judge_retry_attempts": 0}
        specs = {**declare(ws, "gender", GENDER, language="english", metrics=["accuracy"]),
                 **declare(ws, "gender_peer", GENDER, language="english", metrics=["accuracy"], protocol="au_harness", reading="judge")}
        _, scores = run_all(ws, ep.url, specs, [["gender", "accuracy"], ["gender_peer", "accuracy"]], "g", judge_properties=props)
    careful, peer = scores[("gender", "accuracy")], scores[("gender_peer", "accuracy")]
    assert peer["details"]["reading"]["mode"] == "judge"
    assert peer["details"]["lalmeval"]["score"] == pytest.approx(careful["score"])
    assert peer["details"]["lalmeval"]["differs_by"] in (None, "reading: the judge names what is scored, lalmeval reads it carefully (docs/reading.md)")
