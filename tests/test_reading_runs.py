"""Careful reading end to end: `lalmeval run` against a scripted endpoint on 127.0.0.1 that answers like a chatty
audio model; the scores come out as a careful grader's, records and report show what was read."""

import json
import re

import pytest

from lalmeval.cli.commands import main
from lalmeval.metrics.wer import WordErrorRate
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.results.records import Record
from tests.support.endpoint import ScriptedEndpoint
from tests.test_reading import LABELS, TRANSCRIPTS, dataset as metric_dataset

ENGLISH = TRANSCRIPTS["transcripts_en.jsonl"]
EMOTION = [c for c in LABELS if c["choices"] == ["neutral", "joy", "sadness", "anger", "surprise", "fear", "disgust"]]
GENDER = [c for c in LABELS if c["choices"] is None and c["style"] == "gender_plain"]


def replying(cases):
    """The model double: the question 'sample <i>' is answered with case i's reply."""
    def handler(seen, n):
        return cases[int(re.search(r"sample (\d+)", seen.text).group(1))]["reply"]
    return handler


def declare(ws, name, cases, **spec):
    rows = [{"id": f"s{i:02d}", "question": f"sample {i}", "answer": c["reference"]} for i, c in enumerate(cases)]
    return {name: {"hf_repo": ws.jsonl(rows, f"data/{name}.jsonl"), "id_column": "id", "modality": "text", "audio_column": None,
                   "textual_input_column": "question", "target_column": "answer", "postprocessor": "GeneralPostprocessor", **spec}}


def grader_wer(cases):
    metric = WordErrorRate(metric_dataset("en"), GeneralPostprocessor())
    items = [metric.score_record(Record(id="i", prompt="", system=None, params={}, reference=c["reference"], prediction=c["grader"]))
             for c in cases]
    return metric.aggregate(items)[0]


def run_all(ws, endpoint_url, specs, pairs, run_id, **config):
    from tests.support.workspace import model

    ws.runspec("chatty", "replies", specs)
    ws.config([model(endpoint_url, batch_size=4)], pairs, **{"output_dir": str(ws.root / "runs"), **config})
    code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", run_id])
    final = json.loads((ws.root / "runs" / run_id / "final_scores.json").read_text())
    return code, {(s["dataset"], s["metric"]): s for s in final["scores"]}


def test_a_run_of_chatty_replies_scores_as_the_careful_grader_does(ws):
    emotion_choices = EMOTION[0]["choices"]
    with ScriptedEndpoint(replying(ENGLISH)) as asr, ScriptedEndpoint(replying(EMOTION)) as emo:
        specs = {**declare(ws, "asr", ENGLISH, language="english", metrics=["word_error_rate"])}
        code, scores = run_all(ws, asr.url, specs, [["asr", "word_error_rate"]], "asr")
        assert code == 0
        wer = scores[("asr", "word_error_rate")]
        assert wer["score"] == pytest.approx(grader_wer(ENGLISH), abs=1e-9)
        assert wer["num_samples"] == len(ENGLISH) and wer["num_failed"] == 0
        assert wer["details"]["reading"]["refusals"] == sum(c["style"] == "refusal" for c in ENGLISH)

        specs = declare(ws, "emotion", EMOTION, language="english", metrics=["accuracy"], choices=emotion_choices)
        code, scores = run_all(ws, emo.url, specs, [["emotion", "accuracy"]], "emotion")
        grader = 100.0 * sum(c["grader"] == c["reference"] for c in EMOTION) / len(EMOTION)
        assert scores[("emotion", "accuracy")]["score"] == pytest.approx(grader)

    records = [json.loads(line) for line in (ws.root / "runs" / "asr" / "records" / "asr__m.jsonl").read_text().splitlines()]
    lines = [json.loads(line) for line in (ws.root / "runs" / "asr" / "scores" / "asr__word_error_rate__m.jsonl").read_text().splitlines()]
    first = next(line for line in lines if line["id"] == "s00")
    assert next(r for r in records if r["id"] == "s00")["reply"] == ENGLISH[0]["reply"]   # the raw reply is kept
    assert first["read"] == ENGLISH[0]["grader"] and first["reading"] == ["lead_in", "quotes"]

    report = (ws.root / "runs" / "asr" / "report.html").read_text()
    assert 'id="reading"' in report and "lead_in: <b>" in report and "Replies changed" in report

    from lalmeval.reports import load_run
    from lalmeval.reports.samples import collect

    _, table = collect(load_run(ws.root / "runs" / "asr"))
    row = next(r for r in table.rows if r[1] == "s00")
    text = lambda slot: table.strings[row[slot]]  # noqa: E731 - the browser's string table
    assert text(4) == ENGLISH[0]["grader"] and text(5) == ENGLISH[0]["reply"]   # what was scored, beside the raw reply
    assert row[11] == "word_error_rate: lead_in, quotes"


def test_verbatim_reading_and_peer_protocols_score_the_reply_as_it_is(ws):
    with ScriptedEndpoint(replying(ENGLISH)) as asr:
        specs = {**declare(ws, "asr", ENGLISH, language="english", metrics=["word_error_rate"]),
                 **declare(ws, "asr_peer", ENGLISH, language="english", metrics=["word_error_rate"], protocol="lmms")}
        _, careful = run_all(ws, asr.url, specs, [["asr", "word_error_rate"], ["asr_peer", "word_error_rate"]], "a")
        _, verbatim = run_all(ws, asr.url, specs, [["asr", "word_error_rate"]], "b", reading="verbatim")
    assert careful[("asr_peer", "word_error_rate")]["details"]["reading"]["mode"] == "verbatim"
    assert verbatim[("asr", "word_error_rate")]["details"]["reading"]["mode"] == "verbatim"
    assert verbatim[("asr", "word_error_rate")]["score"] > careful[("asr", "word_error_rate")]["score"] + 20


def test_plain_label_references_are_read_as_labels_in_a_run(ws):
    with ScriptedEndpoint(replying(GENDER)) as ep:
        specs = declare(ws, "gender", GENDER, language="english", metrics=["accuracy"])
        code, scores = run_all(ws, ep.url, specs, [["gender", "accuracy"]], "g")
    grader = 100.0 * sum(c["grader"] == c["reference"] for c in GENDER) / len(GENDER)
    score = scores[("gender", "accuracy")]
    assert score["score"] == pytest.approx(grader) and score["details"]["reading"]["unreadable"] == sum(c["grader"] is None for c in GENDER)


def judge_reader(seen, n):
    """The judge double: copies the part after the first colon for a span, names a label it finds, or invents words."""
    reply = seen.text.split("----------\n")[1].rsplit("\n----------", 1)[0]
    if "classify" in seen.text:
        return "female" if "woman" in reply else "a person of unknown gender"
    if "Transcription:" in reply:
        return reply.split("Transcription:", 1)[1].strip()
    return "words the model never said"


def test_the_judge_reader_is_kept_only_when_it_names_a_span_or_a_label(ws):
    cases = [c for c in ENGLISH if c["style"] in ("canary_qwen_transcription", "qwen2_audio_original_content")]
    with ScriptedEndpoint(replying(cases)) as asr, ScriptedEndpoint(judge_reader) as judge, ScriptedEndpoint(replying(GENDER)) as g:
        judge_props = {"judge_model": "reader", "judge_api_endpoint": judge.url, "judge_retry_attempts": 0}
        specs = declare(ws, "asr", cases, language="english", metrics=["word_error_rate"], reading="judge")
        _, scores = run_all(ws, asr.url, specs, [["asr", "word_error_rate"]], "j", judge_properties=judge_props)
        gender = declare(ws, "gender", GENDER, language="english", metrics=["accuracy"], reading="judge")
        _, labels = run_all(ws, g.url, gender, [["gender", "accuracy"]], "k", judge_properties=judge_props)
    reading = scores[("asr", "word_error_rate")]["details"]["reading"]
    canary = [c for c in cases if c["style"] == "canary_qwen_transcription"]
    assert reading["mode"] == "judge" and reading["unreadable"] == len(cases) - len(canary)
    lines = [json.loads(line) for line in (ws.root / "runs" / "j" / "scores" / "asr__word_error_rate__m.jsonl").read_text().splitlines()]
    assert all(x["insertions"] == 0 for x in lines)                       # never a word the model did not say
    assert all(x["deletions"] == x["ref_tokens"] for x in lines if "unreadable" in x.get("reading", []))
    label_lines = [json.loads(line) for line in (ws.root / "runs" / "k" / "scores" / "gender__accuracy__m.jsonl").read_text().splitlines()]
    assert {x.get("prediction_label") for x in label_lines} <= {"female", None}
    assert labels[("gender", "accuracy")]["details"]["reading"]["mode"] == "judge"


def test_reading_judge_without_a_judge_is_refused_with_one_line(ws, capsys):
    from tests.support.workspace import model

    ws.runspec("chatty", "replies", declare(ws, "asr", ENGLISH[:2], language="english", metrics=["word_error_rate"]))
    ws.config([model("http://127.0.0.1:9")], [["asr", "word_error_rate"]], reading="judge")
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) != 0
    err = capsys.readouterr().err
    assert "reading judge (word_error_rate) needs judge_properties" in err and "Traceback" not in err
