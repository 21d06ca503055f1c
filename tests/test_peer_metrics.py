"""Metrics and runspec fields the peers' catalogs need: GSM8K's boxed answer, AIR-Bench's pairwise judge,
COMET's refusal without its extra, prompt_template, and a reference made of several columns."""

import json
import re
from pathlib import Path

import pytest

from lalmeval.config.schema import parse_config
from lalmeval.errors import UserError
from lalmeval.metrics import METRICS
from lalmeval.metrics.air_bench import ratings
from lalmeval.metrics.gsm8k import reference_answer, reply_answer
from lalmeval.run.runner import run
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model, runspec_dataset

SOLUTION = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nShe sold 48+24 = <<48+24=72>>72 clips.\n#### 1,072"


@pytest.mark.parametrize("reply, expected", [
    (r"So the total is \boxed{1,072}.", "1072"),
    (r"First \boxed{3}, then corrected: \boxed{$1,072.}", "1072"),         # the last box counts; $ , and the period go
    (r"\boxed{\frac{1}{2}}", "1"),                                          # no nested braces: the first number inside
    ("1072", "1072"),                                                       # nothing boxed: the reply as it stands
    ("The answer is 1072.", "The answer is 1072."),
])
def test_gsm8k_reads_the_last_boxed_number_of_a_reply(reply, expected):
    assert reply_answer(reply) == expected


def test_gsm8k_reads_the_number_after_the_last_marker_of_a_solution():
    assert reference_answer(SOLUTION) == "1072"
    assert reference_answer("#### -3.5") == "-3.5"
    assert reference_answer("no marker here") == "no marker here"


def test_gsm8k_exact_match_scores_a_text_run_as_the_percentage_of_matching_answers(ws):
    rows = [{"id": "a", "question": "How many?", "answer": SOLUTION}, {"id": "b", "question": "And now?", "answer": "#### 7"}]
    ws.runspec("reasoning", "gsm8k", {"gsm": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "audio_column": None,
                                              "textual_input_column": "question", "target_column": "answer", "metrics": ["gsm8k_exact_match"],
                                              "prompt_template": "Solve the following math problem step by step. Put your final answer inside \\boxed{}."}})
    seen = []

    def reply(request, n):
        seen.append(request.text)
        return r"It is \boxed{1,072}." if "How many?" in request.text else r"\boxed{8}"

    with ScriptedEndpoint(reply) as ep:
        ws.config([model(ep.url)], [["gsm", "gsm8k_exact_match"]])
        result = ws.run()
    assert result.scores[0].score == pytest.approx(50.0)
    assert all(t.startswith("Solve the following math problem step by step. Put your final answer inside \\boxed{}.\n") for t in seen)


def test_prompt_template_places_the_rows_instruction_where_the_peer_does(ws):
    rows = ws.copy_demo_audio(demo_rows(2))
    for row in rows:
        row["instruction"] = "Transcribe it."
    ws.runspec("asr", "framed", {
        "au_style": {"hf_repo": ws.jsonl(rows), "id_column": "id", "additional_instruction_column": "instruction",
                     "prompt_template": "Return ONLY the transcript.\n{instruction}"},
        "lmms_style": {"hf_repo": ws.jsonl(rows, "data/other.jsonl"), "id_column": "id", "additional_instruction_column": "instruction",
                       "prompt_template": "{instruction}\nAnswer in English."},
        "prefix_only": {"hf_repo": ws.jsonl(rows, "data/third.jsonl"), "id_column": "id", "prompt_template": "Please transcribe."},
    })
    seen = {}
    with ScriptedEndpoint(lambda s, n: seen.setdefault(s.text, "ok") and "ok") as ep:
        ws.config([model(ep.url)], [["au_style", "word_error_rate"], ["lmms_style", "word_error_rate"], ["prefix_only", "word_error_rate"]])
        ws.run()
    assert set(seen) == {"Return ONLY the transcript.\nTranscribe it.", "Transcribe it.\nAnswer in English.", "Please transcribe."}


def test_a_list_target_column_makes_the_reference_a_json_object_of_those_columns(ws):
    rows = ws.copy_demo_audio(demo_rows(1))
    rows[0].update(instruction_id_list=["punctuation:no_comma"], kwargs=[{"num": None}])
    ws.runspec("qa", "multi", {"multi": {"hf_repo": ws.jsonl(rows), "id_column": "id", "target_column": ["instruction_id_list", "kwargs"],
                                         "metrics": ["accuracy"]}})
    with ScriptedEndpoint(lambda s, n: "fine") as ep:
        ws.config([model(ep.url)], [["multi", "accuracy"]])
        ws.run()
    [record] = ws.records("multi", "m")
    assert json.loads(record["reference"]) == {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"num": None}]}


def test_a_list_target_column_with_options_is_refused(ws):
    rows = ws.copy_demo_audio(demo_rows(1))
    ws.runspec("qa", "multi", {"mc": {"hf_repo": ws.jsonl(rows), "target_column": ["a", "b"], "choices": ["x", "y"]}})
    ws.config([model("http://127.0.0.1:9/v1")], [["mc", "accuracy"]])
    with pytest.raises(UserError, match="dataset 'mc': multiple choice reads its gold answer from one target_column, not a list"):
        ws.plan()


def test_comet_refuses_to_start_without_its_package_or_a_source_column(monkeypatch, ws):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "comet" else real(name, *a))
    config = parse_config({"dataset_metric": [["x", "comet"]], "models": [{"name": "m", "url": "http://127.0.0.1:9/v1", "model": "m"}]}, "c.yaml")
    with pytest.raises(UserError, match=r"metric 'comet' needs the unbabel-comet package .*pip install unbabel-comet"):
        METRICS.get("comet").check(config)
    rows = ws.copy_demo_audio(demo_rows(1))
    ws.runspec("st", "translation", {"st": {"hf_repo": ws.jsonl(rows), "metrics": ["comet"]}})
    from lalmeval.catalog.runspecs import Catalog

    dataset = Catalog.load([ws.root / "runspecs"]).datasets["st"]
    with pytest.raises(UserError, match="dataset 'st': metric 'comet' scores against the source sentence: set transcript_column"):
        METRICS.get("comet").check_dataset(dataset)


@pytest.mark.parametrize("judgment, expected", [("8 6", (8.0, 6.0)), ("Scores: 10 3.", (10.0, 3.0)), ("7", None), ("0 11", None)])
def test_air_bench_ratings_are_the_first_two_numbers_from_1_to_10(judgment, expected):
    assert ratings(judgment) == expected


def test_air_bench_judge_asks_both_orders_and_averages_the_models_two_ratings(ws):
    rows = ws.copy_demo_audio(demo_rows(2))
    for row in rows:
        row.update(question="What is said?", meta_info="A man speaks a short command.")
    ws.runspec("audio", "air", {"chat": {"hf_repo": ws.jsonl(rows), "id_column": "id", "additional_instruction_column": "question",
                                         "transcript_column": "meta_info", "metrics": ["llm_judge_air_bench"]}})
    prompts = []

    def judge(seen, n):
        prompts.append(seen.text)
        first = re.search(r"\[The Start of Assistant 1s Answer\]\n(.*?)\n", seen.text).group(1)
        return "9 4" if first != "model says" else "5 9"  # the model's answer rated 4 in one order, 5 in the other

    with ScriptedEndpoint(lambda s, n: "model says") as model_ep, ScriptedEndpoint(judge) as judge_ep:
        ws.config([model(model_ep.url)], [["chat", "llm_judge_air_bench"]],
                  judge_properties={"judge_model": "judge-1", "judge_api_endpoint": judge_ep.url})
        result = run(ws.plan(), ws.root / "runs", "t", quiet=True)
    score = result.scores[0]
    assert score.score == pytest.approx(4.5) and score.details["scale"] == "1-10" and score.details["num_judge_failed"] == 0
    assert len(prompts) == 4 and all("[Detailed Audio Description]\nA man speaks a short command.\n[Question]\nWhat is said?" in p for p in prompts)
    assert sum("[The Start of Assistant 1s Answer]\nmodel says" in p for p in prompts) == 2


def test_air_bench_judge_counts_an_unparseable_judgment_as_a_failure_never_as_zero(ws):
    rows = ws.copy_demo_audio(demo_rows(2))
    for row in rows:
        row.update(question="What is said?", meta_info="speech")
    ws.runspec("audio", "air", {"chat": {"hf_repo": ws.jsonl(rows), "id_column": "id", "transcript_column": "meta_info", "metrics": ["llm_judge_air_bench"]}})
    calls = []

    def judge(seen, n):
        calls.append(seen.text)
        return "no numbers here" if rows[0]["reference"] in seen.text else "6 6"

    with ScriptedEndpoint(lambda s, n: "answer") as model_ep, ScriptedEndpoint(judge) as judge_ep:
        ws.config([model(model_ep.url)], [["chat", "llm_judge_air_bench"]], judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url})
        result = run(ws.plan(), ws.root / "runs", "t", quiet=True)
    score = result.scores[0]
    assert score.score == pytest.approx(6.0) and score.details["num_judge_failed"] == 1 and score.details["judged"] == 1


AIR_CHAT = json.loads((Path(__file__).parent / "fixtures" / "peer_scores" / "air_bench_chat.json").read_text(encoding="utf-8"))


def test_air_bench_chat_under_lmms_prints_what_lmms_evals_own_code_prints_for_the_same_judgments(ws):
    doc, pairs = AIR_CHAT["doc"], AIR_CHAT["pairs"]
    rows = ws.copy_demo_audio(demo_rows(len(pairs)))
    for i, row in enumerate(rows):  # sample 0 is the peer's doc; the others tell the judge double which pair to give
        row.update(question=doc["question"] + (f" (clip {i})" if i else ""), meta_info=doc["meta_info"], answer_gt=doc["answer_gt"])
    ws.runspec("audio", "air", {"chat": {"hf_repo": ws.jsonl(rows), "id_column": "id", "additional_instruction_column": "question",
                                         "transcript_column": "meta_info", "target_column": "answer_gt", "protocol": "lmms",
                                         "prompt_template": "{instruction}Give a detail answer to the question in English.",
                                         "metrics": ["llm_judge_air_bench"]}})
    seen = []

    def judge(request, n):
        seen.append(request)
        clip = re.search(r"\(clip (\d+)\)\n", request.text)
        pair = pairs[int(clip.group(1)) if clip else 0]
        return pair[0] if f"Assistant 1s Answer]\n{doc['answer_gt']}\n" in request.text else pair[1]

    with ScriptedEndpoint(lambda s, n: AIR_CHAT["reply"]) as model_ep, ScriptedEndpoint(judge) as judge_ep:
        ws.config([model(model_ep.url)], [["chat", "llm_judge_air_bench"]],
                  judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url, "judge_retry_attempts": 0, "judge_temperature": 0.7})
        result = run(ws.plan(), ws.root / "runs", "t", quiet=True)
    assert sorted(s.text for s in seen if "(clip" not in s.text) == sorted(AIR_CHAT["prompts"])  # lmms-eval's two prompts, byte for byte
    assert {(s.body["temperature"], s.body["max_tokens"]) for s in seen} == {(0.0, AIR_CHAT["max_tokens"])}
    score = result.scores[0]
    assert score.score == pytest.approx(AIR_CHAT["printed"], abs=0.005)
    assert score.details["num_judge_failed"] == sum(p is None for p in AIR_CHAT["peer"])
    assert score.details["lalmeval"]["differs_by"].startswith("judgment reading")  # "8 6" then "7": lalmeval wants both


def test_air_bench_judge_shows_the_dataset_question_without_the_prompt_templates_frame():
    from lalmeval.metrics.air_bench import question_of

    assert question_of("What is it?Give a detail answer to the question in English.", "{instruction}Give a detail answer to the question in English.") == "What is it?"
    assert question_of("Q: What is it?", "Q: {instruction}") == "What is it?"
    assert question_of("What is it? {x}", "{instruction} {x}") == "What is it? {x}"  # a frame with fields stays


AU_GSM8K = json.loads((Path(__file__).parent / "fixtures" / "peer_scores" / "au_gsm8k.json").read_text(encoding="utf-8"))


def test_gsm8k_exact_match_credits_and_prints_what_au_harnesss_own_metric_does(tmp_path):
    from lalmeval.metrics.gsm8k import Gsm8kExactMatch
    from lalmeval.postprocess.general import GeneralPostprocessor
    from lalmeval.results.records import Record

    ds = runspec_dataset(tmp_path, language="en", protocol="au_harness", metrics=["gsm8k_exact_match"])
    metric = Gsm8kExactMatch(ds, GeneralPostprocessor())
    cases = AU_GSM8K["cases"]
    items = [metric.score_record(Record(id=str(i), prompt="", system=None, params={}, reference=c["reference"], prediction=c["reply"]))
             for i, c in enumerate(cases)]
    assert [(x["score"], x["extracted"], x["expected"]) for x in items] == [(float(c["peer"]), c["extracted"], c["expected"]) for c in cases]
    value, _ = metric.aggregate(items)
    assert round(value, 2) == AU_GSM8K["printed"]


AU_IFEVAL = json.loads((Path(__file__).parent / "fixtures" / "peer_scores" / "au_ifeval.json").read_text(encoding="utf-8"))


def test_instruction_following_follows_and_prints_what_au_harnesss_own_ifeval_code_does(tmp_path):
    from lalmeval.metrics.instruction_following import InstructionFollowing
    from lalmeval.postprocess.general import GeneralPostprocessor
    from lalmeval.results.records import Record

    ds = runspec_dataset(tmp_path, language="en", protocol="au_harness", target_column=["instruction_id_list", "kwargs"],
                         metrics=["instruction_following"])
    metric = InstructionFollowing(ds, GeneralPostprocessor())
    cases = AU_IFEVAL["cases"]
    items = [metric.score_record(Record(id=str(i), prompt="", system=None, params={}, prediction=c["reply"],
                                        reference=json.dumps({"instruction_id_list": c["instruction_id_list"], "kwargs": c["kwargs"]})))
             for i, c in enumerate(cases)]
    assert [(x["strict"], x["loose"]) for x in items] == [(c["strict"], c["loose"]) for c in cases]
    value, details = metric.aggregate(items)
    printed = AU_IFEVAL["printed"]
    assert value == pytest.approx(printed["final"], abs=0.01)  # AU-Harness rounds the four to 2 decimals before their mean
    for ours, theirs in (("strict_prompt", "strict-prompt"), ("strict_instruction", "strict-instruction"), ("loose_prompt", "loose-prompt"),
                         ("loose_instruction", "loose-instruction")):
        assert details[ours] == pytest.approx(printed[theirs], abs=0.005)
