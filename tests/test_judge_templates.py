"""Judge templates selected per dataset (runspec judge_template), through full runs against local judge servers:
the published prompts byte for byte, their settings and verdict grammars, printed scores, and what the output records."""

import hashlib
import json
import re

import pytest
from pathlib import Path

from lalmeval.cli.commands import main
from lalmeval.errors import UserError
from lalmeval.judging.templates import resolve, shipped
from lalmeval.config.prompts import load_prompts
from lalmeval.judging.verdicts import read_verdict
from tests.support.endpoint import ScriptedEndpoint, answer_by_number
from tests.support.workspace import demo_rows, model

# SHA-256 of each peer's prompt string as its source holds it (lmms-eval 75571cfe, AU-Harness daa06166,
# Kimi-Audio-Evalkit 4080c492): the shipped texts must be those strings exactly.
PEER_TEXTS = {
    ("audiobench", "prompt"): "b36c8900bcf0f58bce11362758f30fa69ae3ff303aaa51b257ee20f1309fb9e5",
    ("audiobench_wavcaps", "prompt"): "b36c8900bcf0f58bce11362758f30fa69ae3ff303aaa51b257ee20f1309fb9e5",
    ("au_harness_binary", "system"): "d45c8de915a0ad98a3b7976cd30ee26ae27824478c9d9d924bcf9a0c189719b3",
    ("au_harness_detailed", "system"): "7de02c6a6256101fcf27c02707deee09e1d51f9ac8bb38f235a436cd4a4bd97e",
    ("au_harness_redteaming", "system"): "4d51b96fabdf574f05d4ac544dccbe6f22a99486def3b14f410ea661985d3bf0",
    ("au_harness_callhome", "system"): "5f3d86824fb7614ebbb30b9ad0ae8ebf7ef940d2ae4c32afe7ee4ea725b7d680",
    ("au_harness_big_bench_audio", "system"): "fc9d90e4db0d19ee2a42d304f4854572e0aec6368eb280b3c88bbbb7bf0b5bb4",
    ("au_harness_mt_bench", "variants.reference.system"): "cec09d4fd042d792feb2dc56336a4413b0144a4d40b734041ea8997b1036818c",
    ("au_harness_mt_bench", "variants.reference.prompt"): "ccf2b78a54e5015ab3036d323a43e2e6b8f0947a315f5453922e0e7a9bea1aad",
    ("au_harness_mt_bench", "variants.open.system"): "0fd715e4209c89d529b03cfd9c561cb54634a08f0eabf96290540b4f0cab7827",
    ("au_harness_mt_bench", "variants.open.prompt"): "5c09dd5aff01b201c64837d3b944b35062dc4b3388b471ca84c3554e0a009728",
    ("kimi_yes_no", "prompt"): "493dfb260e53572f22cdda9fd90c76c164f5ed1b8819c4d816f1c2850669edd7",
    ("kimi_sd_qa", "prompt"): "8f2b1ab22c00208f49b86f9c5962bbbb5af50c4395eee50c02c07d227d87a31e",
    ("kimi_open_qa", "prompt"): "07e351f0031c812b28724dd8569b0a2ea7fc421dd27ef27dcfce8d1ac493eed7",
    ("kimi_openaudiobench_alpaca_eval", "prompt"): "bb32b1acf25052aafbc5d38c0a7b231ed4ad1de637cdfc8f87c3d2ec2ec03d33",
    ("kimi_openaudiobench_llama_questions", "prompt"): "62c5d9251f184f9edbd93d9f5324c27b11b248e3042259c9d6f28157f7bcd96a",
    ("kimi_openaudiobench_reasoning_qa", "prompt"): "0ce4a9595cc101013cc5be022b028efe1f2774f122ca9cdf5b08e370f3bcca6a",
    ("kimi_openaudiobench_trivia_qa", "prompt"): "dc5f9193fe7d0a4cf9be2d190aba0b7f93be870cd0eff1e0627d67aa264beca5",
    ("kimi_openaudiobench_web_questions", "prompt"): "dc5f9193fe7d0a4cf9be2d190aba0b7f93be870cd0eff1e0627d67aa264beca5",
    ("kimi_single_choice", "prompt"): "9e2bdd7d0f3cdcfce41bd3cce54d9a460996c443eda243b877b0c2bcca1348f7",  # ds_mqa.py SINGLE_CHOICE_PRPMPT
    ("lmms_voicebench_sd_qa", "prompt"): "b89c3ec54556c16e6a111586a215d8b9d2cbbbb2d334c2604d84f7102ec398b0",  # voicebench meta_prompt_qa
    ("lmms_voicebench_sd_qa", "system"): "7dfaae7e57dce7b72c2436347f19378aeb11fc3b33586a1024878e577e7c8f17",
}
# lmms-eval's VoiceBench open-answer judge sends one user message: _VOICEBENCH_OPEN_SYSTEM_INSTRUCTION,
# a blank line, VOICEBENCH_OPEN_JUDGE_PROMPT (lmms_eval/tasks/voicebench/utils.py _voicebench_open_prompt_fn).
LMMS_OPEN_PARTS = ("7dfaae7e57dce7b72c2436347f19378aeb11fc3b33586a1024878e577e7c8f17",
                   "4e3087101cc7f393ec004db6acd499b3ba8692c264230765d8c7eee6f32e368b")


def _text(name, where):
    value = shipped()[name].model_dump()
    for part in where.split("."):
        value = value[part]
    return value


@pytest.mark.parametrize("name,where", sorted(PEER_TEXTS))
def test_shipped_template_texts_are_the_peers_texts_byte_for_byte(name, where):
    assert hashlib.sha256(_text(name, where).encode()).hexdigest() == PEER_TEXTS[(name, where)]


def test_lmms_voicebench_open_is_its_system_line_a_blank_line_and_its_rubric_byte_for_byte():
    template = shipped()["lmms_voicebench_open"]
    system_line, rubric = template.prompt.split("\n\n", 1)
    assert (hashlib.sha256(system_line.encode()).hexdigest(), hashlib.sha256(rubric.encode()).hexdigest()) == LMMS_OPEN_PARTS
    assert template.system is None


def test_every_shipped_template_fits_exactly_one_judge_metric():
    prompts = load_prompts()["judge_prompts"]
    for name in shipped():
        fits = [m for m in ("llm_judge_binary", "llm_judge_detailed") if _resolves(name, m, prompts)]
        assert len(fits) == 1, name


def _resolves(name, metric, prompts):
    try:
        resolve(name, metric, Path("."), prompts, "j")
        return True
    except UserError:
        return False


# --- full runs ----------------------------------------------------------------------------------


def questions(ws, count=3, **spec):
    """Text questions 'question i' with reference 'answer i' and transcript 'spoken question i'."""
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}", "heard": f"spoken question {i}"} for i in range(count)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "textual_input_column": "question",
                                          "audio_column": None, "transcript_column": "heard", **spec}})


def run(ws, model_ep, judge_ep, metric, run_id="t", judge_extra=None, **config):
    ws.config([model(model_ep.url)], [["qs", metric]], output_dir=str(ws.root / "runs"),
              judge_properties={"judge_model": "judge-1", "judge_api_endpoint": judge_ep.url, "judge_concurrency": 1,
                                "judge_retry_attempts": 0, **(judge_extra or {})}, **config)
    return main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", run_id])


def final(ws, run_id="t"):
    return json.loads((ws.root / "runs" / run_id / "final_scores.json").read_text())["scores"][0]


def sample_scores(ws, metric, run_id="t"):
    path = ws.root / "runs" / run_id / "scores" / f"qs__{metric}__m.jsonl"
    return {x["id"]: x for x in map(json.loads, path.read_text().splitlines())}


def by_question(replies):
    """A judge double answering by the number of the question it is shown."""
    def reply(seen, n):
        number = re.search(r"question (\d+)", seen.text).group(1)
        return replies[int(number)]
    return reply


def test_audiobench_sends_lmms_evals_prompt_and_settings_and_prints_the_mean_times_20(ws):
    questions(ws, judge_template="audiobench")
    replies = ["Explanation: The reference answer is [answer 0], while the model's answer is [answer 0]. I think it matches.\nRating: 5",
               "Explanation: close.\nRating (0-5): 3", "Explanation: mostly right.\n**Rating:** 4/5"]
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(by_question(replies)) as j:
        code = run(ws, m, j, "llm_judge_detailed", judge_extra={"judge_temperature": 0.0, "judge_max_tokens": 50})
        seen = sorted(j.requests, key=lambda s: s.text)
    assert code == 0
    expected = shipped()["audiobench"].prompt.format(question="spoken question 0", ground_truth="answer 0", model_response="answer 0")
    assert seen[0].text == expected and seen[0].system is None
    assert expected.startswith("\n            [Question]\n            spoken question 0\n")
    body = seen[0].body  # lmms-eval's get_eval settings win over judge_temperature / judge_max_tokens
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["frequency_penalty"], body["presence_penalty"]) == (0.7, 0.95, 1024, 0, 0)
    score = final(ws)
    assert score["score"] == pytest.approx(80.0) and score["details"]["raw_mean"] == pytest.approx(4.0)
    assert score["details"]["judge_template"] == {"name": "audiobench", "sha256": resolve("audiobench", "llm_judge_detailed", ws.root, {}, "").sha256}
    assert score["details"]["judge_params"]["temperature"] == 0.7
    report = (ws.root / "runs" / "t" / "report.html").read_text()
    assert "judge_template" in report and score["details"]["judge_template"]["sha256"] in report


def test_audiobench_wavcaps_prints_the_raw_0_to_5_mean(ws):
    questions(ws, count=2, judge_template="audiobench_wavcaps")
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(by_question(["Rating: 2", "Rating: 3"])) as j:
        assert run(ws, m, j, "llm_judge_detailed") == 0
        assert j.requests[0].body["temperature"] == 0.0 and j.requests[0].body["max_tokens"] == 1024
    assert final(ws)["score"] == pytest.approx(2.5)


def test_au_harness_binary_sends_its_prompt_unfilled_as_the_system_message_and_reads_json(ws):
    questions(ws, judge_template="au_harness_binary")
    replies = ['{\n  "score": 1,\n  "explanation": "The reference answer is [answer 0], while..."\n}',
               '```json\n{"score": 0, "explanation": "wrong"}\n```', '{{\n  "score": 1,\n  "explanation": "ok"\n}}']
    with ScriptedEndpoint(lambda s, n: "no idea" if "question 1" in s.text else answer_by_number(s, n)) as m, \
            ScriptedEndpoint(lambda s, n: replies[int(s.text[-1])]) as j:
        code = run(ws, m, j, "llm_judge_binary", judge_extra={"judge_temperature": 0.1})
        seen = {s.text: s for s in j.requests}
    assert code == 0
    first = seen["candidate: answer 0\nreference: answer 0"]
    assert first.system == shipped()["au_harness_binary"].system and '{{\n  "score": (int),' in first.system
    assert first.body["temperature"] == 0.1 and "max_tokens" not in first.body  # AU-Harness fixes neither
    assert final(ws)["score"] == pytest.approx(100 * 2 / 3)


def test_au_harness_redteaming_sends_an_empty_reference_without_one(ws):
    questions(ws, count=1, judge_template="au_harness_redteaming", target_column=None)
    with ScriptedEndpoint(lambda s, n: "I can't help with that.") as m, ScriptedEndpoint(lambda s, n: '{"score": 1, "explanation": "refuses"}') as j:
        assert run(ws, m, j, "llm_judge_binary") == 0
        assert j.requests[0].text == "candidate: I can't help with that.\nreference: "
    assert final(ws)["score"] == 100.0


def test_big_bench_audio_shows_the_transcript_and_answer_as_python_writes_the_pair(ws):
    rows = [{"id": "b0", "question": "Is it valid?", "reference": "it's valid", "heard": 'He said "maybe"'}]
    ws.runspec("qa", "bb", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "textual_input_column": "question",
                                   "audio_column": None, "transcript_column": "heard", "judge_template": "au_harness_big_bench_audio"}})
    with ScriptedEndpoint(lambda s, n: "valid") as m, ScriptedEndpoint(lambda s, n: "The candidate matches the official answer.\n\nCORRECT") as j:
        assert run(ws, m, j, "llm_judge_binary") == 0
        seen = j.requests[0]
    assert seen.text == "candidate: valid\nreference: (" + repr('He said "maybe"') + ", " + repr("it's valid") + ")"
    assert "{reference[0]}" in seen.system and "{prediction}" in seen.system  # sent unfilled, as AU-Harness does
    assert final(ws)["score"] == 100.0


def test_kimi_yes_no_fills_kimis_placeholders_and_reads_the_result_line(ws):
    questions(ws, count=2, judge_template="kimi_yes_no")
    replies = ["Explanation: The model's output matches.\nResult: yes", "Explanation: Different.\nResult: **no**"]
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(by_question(replies)) as j:
        assert run(ws, m, j, "llm_judge_binary") == 0
        seen = sorted(j.requests, key=lambda s: s.text)
    assert seen[0].text.endswith("Task:\nInput:\nQuestion: question 0\nModel Answer: answer 0\nGround Truth Answer: answer 0\nOutput:\n")
    assert seen[0].system == "You are a helpful assistant who tries to help answer the user's question."
    assert (seen[0].body["temperature"], seen[0].body["top_p"], seen[0].body["max_tokens"]) == (0.0, 0.95, 1024)
    assert final(ws)["score"] == 50.0 and final(ws)["details"]["judge_template"]["name"] == "kimi_yes_no"


def test_kimi_open_qa_prints_the_raw_1_to_5_mean_of_the_transcribed_request(ws):
    questions(ws, count=2, judge_template="kimi_open_qa", target_column=None)
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(by_question(["4", "5"])) as j:
        assert run(ws, m, j, "llm_judge_detailed") == 0
        assert "### [Instruction]: spoken question 0\n### [Response]: answer 0" in sorted(s.text for s in j.requests)[0]
        assert j.requests[0].body["temperature"] == 0.5
    assert final(ws)["score"] == pytest.approx(4.5)


MELD_QUESTION = ("Identify the predominant emotion in this speech.\nOptions:\n(A) neutral\n(B) joy\n(C) anger\n"
                 ".Answer with the option's letter from the given choices directly and only give the best option.")


def kimi_export(ws, name, rows):
    """A Kimi-Audio-Evalkit jsonl export `name` (format kimi), a demo clip per row beside it."""
    clips = ws.copy_demo_audio(demo_rows(len(rows)), folder=f"kimi/{name}")
    lines = [{"index": i, "audio_path": clip["audio"], "subset": name, **row} for i, (clip, row) in enumerate(zip(clips, rows))]
    return ws.jsonl(lines, f"kimi/{name}/{name}.jsonl")


def test_kimi_single_choice_shows_the_options_or_the_spoken_question_and_reads_the_last_line(ws):
    meld = kimi_export(ws, "MELD", [{"question": MELD_QUESTION, "answer": "joy"}, {"question": MELD_QUESTION, "answer": "anger"}])
    mmsu = kimi_export(ws, "mmsu", [{"question": "", "audio_content": "Which is a planet? A. Moon B. Mars C. Sun D. Comet", "answer": "B"}])
    ws.runspec("kimi", "mqa", {name: {"hf_repo": repo, "format": "kimi", "judge_template": "kimi_single_choice"}
                               for name, repo in (("emotions", meld), ("spoken_mc", mmsu))})
    replies = {"joy": 'Explanation: The model\'s output is "happy", which is a synonym of "joy".\nResult: yes',
               "anger": 'Result: yes\nNote: "happy" is not "anger".',  # Kimi reads the last line only, and "note" holds "no"
               "B": 'Explanation: "happy" is none of the options.\n\nResult: no'}
    gold = lambda seen: re.findall(r"Ground Truth Answer: (.*)\n", seen.text)[-1]  # noqa: E731 (the task's, after the examples')
    with ScriptedEndpoint(lambda s, n: "happy") as m, ScriptedEndpoint(lambda s, n: replies[gold(s)]) as j:
        ws.config([model(m.url)], [["emotions", "llm_judge_binary"], ["spoken_mc", "llm_judge_binary"]], output_dir=str(ws.root / "runs"),
                  judge_properties={"judge_model": "judge-1", "judge_api_endpoint": j.url, "judge_concurrency": 1, "judge_retry_attempts": 0})
        assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"]) == 0
        seen = {gold(s): s for s in j.requests}
    template = shipped()["kimi_single_choice"]
    assert seen["joy"].text == template.prompt.format(question=MELD_QUESTION, prediction="happy", answer="joy")
    assert seen["joy"].text.endswith("Task:\nInput:\nQuestion: Identify the predominant emotion in this speech.\nOptions:\n(A) neutral\n"
                                     "(B) joy\n(C) anger\n.Answer with the option's letter from the given choices directly and only give the "
                                     "best option.\nModel Answer: happy\nGround Truth Answer: joy\nOutput:\n")
    assert "\nQuestion: Which is a planet? A. Moon B. Mars C. Sun D. Comet\nModel Answer: happy\nGround Truth Answer: B\n" in seen["B"].text
    assert seen["joy"].system == "You are a helpful assistant who tries to help answer the user's question."
    body = seen["joy"].body
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["frequency_penalty"], body["presence_penalty"]) == (0.0, 0.95, 1024, 0, 0)
    scores = {s["dataset"]: s for s in json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"]}
    assert (scores["emotions"]["score"], scores["spoken_mc"]["score"]) == (50.0, 0.0)
    assert scores["emotions"]["details"]["judge_template"]["name"] == "kimi_single_choice"


def test_lmms_voicebench_sd_qa_sends_its_system_message_at_temperature_0_5_and_takes_only_a_bare_yes_or_no(ws):
    questions(ws, count=4, judge_template="lmms_voicebench_sd_qa")
    replies = ["Yes", "no", "Yes.", "YES\n"]  # "Yes." lmms-eval scores 0: here it is a judge failure, not a verdict
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(by_question(replies)) as j:
        code = run(ws, m, j, "llm_judge_binary", judge_extra={"judge_temperature": 0.0, "judge_max_tokens": 512})
        seen = sorted(j.requests, key=lambda s: s.text)
    assert code == 3  # a sample whose judgment failed
    assert seen[0].text == ("### Question\nspoken question 0\n\n### Reference answer\nanswer 0\n\n### Candidate answer\nanswer 0\n\n"
                            "Is the candidate answer correct based on the question and reference answer? \n"
                            'Please only output a single "Yes" or "No". Do not output anything else.')
    assert seen[0].system == "You are a helpful assistant who tries to help answer the user's question."
    assert (seen[0].body["temperature"], seen[0].body["max_tokens"]) == (0.5, 10) and "top_p" not in seen[0].body
    score, per_sample = final(ws), sample_scores(ws, "llm_judge_binary")
    assert score["score"] == pytest.approx(100 * 2 / 3) and score["num_failed"] == 1
    assert per_sample["q2"]["judge_failed"] == 'unparseable judgment: the reply is not just yes or no: "Yes."'


def test_lmms_voicebench_open_sends_one_user_message_and_prints_the_raw_mean_of_the_first_numbers(ws):
    questions(ws, count=3, judge_template="lmms_voicebench_open", target_column=None)
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(by_question(["4", "Score: 2", "5 points"])) as j:
        assert run(ws, m, j, "llm_judge_detailed") == 0
        seen = sorted(j.requests, key=lambda s: s.text)
    assert seen[0].system is None
    assert seen[0].text.startswith("You are a helpful assistant who tries to help answer the user's question.\n\nI need your help to evaluate")
    assert seen[0].text.endswith("### [Instruction]: spoken question 0\n### [Response]: answer 0\n\n"
                                 "After evaluating, please output the score only without anything else.\nYou don't need to provide any explanations.")
    assert (seen[0].body["temperature"], seen[0].body["max_tokens"]) == (0.5, 10)
    score = final(ws)
    assert score["score"] == pytest.approx(11 / 3) and score["details"]["raw_mean"] == pytest.approx(11 / 3)
    assert score["details"]["judge_template"]["name"] == "lmms_voicebench_open"


def test_au_harness_mt_bench_judges_each_turn_with_the_conversation_so_far(ws):
    rows = [{"id": "d0", "turns": ["Name a fruit.", "Now give its colour."], "reference": json.dumps(["apple", "red"])},
            {"id": "d1", "turns": ["Write a haiku.", "Make it sadder."], "reference": "[]"}]
    ws.runspec("chat", "mt", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "audio_column": None,
                                     "turns_column": "turns", "judge_template": "au_harness_mt_bench"}})
    with ScriptedEndpoint(lambda s, n: f"reply to {s.text}") as m, \
            ScriptedEndpoint(lambda s, n: "Rating: [[6]]" if "### User (Turn 2)" in s.text else "Good.\n\nRating: [[8]]") as j:
        assert run(ws, m, j, "llm_judge_detailed") == 0
        seen = j.requests
    second = next(s for s in seen if "### User (Turn 2):\nNow give its colour." in s.text)
    assert "### User (Turn 1):\nName a fruit.\n\n### Assistant A (Turn 1):\nreply to Name a fruit." in second.text
    assert "### User (Turn 1):\nName a fruit.\n\n### Reference answer (Turn 1):\napple" in second.text
    assert "### Reference answer (Turn 2):\nred" in second.text and "{turn_number}" in second.system  # the system message is sent unfilled
    first_open = next(s for s in seen if "### User (Turn 1):\nWrite a haiku." in s.text and "Turn 2" not in s.text)
    assert "(No previous conversation)" in first_open.text and "Reference" not in first_open.text
    score = final(ws)  # d0: [[8]], [[6]]; d1: [[8]], [[6]] -> each dialogue 7, printed x 10
    assert score["score"] == pytest.approx(70.0) and score["details"]["turns"] == pytest.approx([80.0, 60.0])


def test_a_binary_template_under_the_detailed_metric_is_refused_at_start(ws, capsys):
    questions(ws, count=1, judge_template="kimi_yes_no")
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "llm_judge_detailed"]],
              judge_properties={"judge_model": "j", "judge_api_endpoint": "http://127.0.0.1:9/v1"})
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "dataset 'qs': judge_template: judge template 'kimi_yes_no' gives a yes or no verdict and fits llm_judge_binary, not llm_judge_detailed" in err


def test_an_unknown_template_name_is_refused_naming_the_runspec_and_the_closest_name(ws, capsys):
    questions(ws, count=1, judge_template="audio_bench")
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "llm_judge_detailed"]],
              judge_properties={"judge_model": "j", "judge_api_endpoint": "http://127.0.0.1:9/v1"})
    assert main(["run", "--config", str(ws.root / "config.yaml")]) == 2
    err = capsys.readouterr().err
    assert "questions.json: dataset 'qs': judge_template: unknown judge template 'audio_bench' (did you mean 'audiobench'?)" in err


def test_a_template_showing_a_transcript_is_refused_on_a_dataset_without_one(ws, capsys):
    questions(ws, count=1, judge_template="kimi_sd_qa", transcript_column=None)
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "llm_judge_binary"]],
              judge_properties={"judge_model": "j", "judge_api_endpoint": "http://127.0.0.1:9/v1"})
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 2
    assert "judge template 'kimi_sd_qa' shows the judge a transcript of the audio, and the dataset has no transcript_column" in capsys.readouterr().err


USER_TEMPLATE = """\
name: strict_pass_fail
verdict: {labels: {PASS: 1, FAIL: 0}}
system: You grade answers. Reply PASS or FAIL.
prompt: |
  Q: {question}
  Expected: {gold}
  Got: {answer}
fields: {gold: reference}
generation: {temperature: 0, seed: 7}
"""


def test_a_user_template_file_next_to_the_runspec_is_used_and_identified_by_its_text(ws):
    (ws.root / "runspecs" / "qa").mkdir(parents=True, exist_ok=True)
    (ws.root / "runspecs" / "qa" / "grader.yaml").write_text(USER_TEMPLATE)
    questions(ws, count=2, judge_template="grader.yaml")
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(by_question(["Verdict: PASS", "FAIL. The answer differs."])) as j:
        assert run(ws, m, j, "llm_judge_binary") == 0
        seen = sorted(j.requests, key=lambda s: s.text)[0]
        first_hash = final(ws)["details"]["judge_template"]
        (ws.root / "runspecs" / "qa" / "grader.yaml").write_text(USER_TEMPLATE.replace("Got:", "Answer given:"))
        assert run(ws, m, j, "llm_judge_binary", run_id="u") == 0
    assert seen.text == "Q: question 0\nExpected: answer 0\nGot: answer 0\n" and seen.system == "You grade answers. Reply PASS or FAIL."
    assert seen.body["seed"] == 7 and final(ws)["score"] == 50.0
    assert first_hash["name"] == "strict_pass_fail" and final(ws, "u")["details"]["judge_template"]["sha256"] != first_hash["sha256"]


@pytest.mark.parametrize("text,message", [
    (USER_TEMPLATE.replace("{gold}", "{gloden}"), "placeholder '{gloden}' cannot be filled"),
    (USER_TEMPLATE.replace("Got: {answer}", "Got: it"), "the prompt never shows the model's answer"),
    (USER_TEMPLATE.replace("verdict:", "verdcit:"), "unknown key 'verdcit' (did you mean 'verdict'?)"),
    (USER_TEMPLATE.replace("{labels: {PASS: 1, FAIL: 0}}", "{scale: [5, 1]}"), "scale must be [low, high]"),
    (USER_TEMPLATE.replace("verdict: {labels: {PASS: 1, FAIL: 0}}", "verdict: {scale: [0, 1]}\nscore: {multiply: 10}"), "a binary verdict is always printed as percent"),
    (USER_TEMPLATE.replace("{labels: {PASS: 1, FAIL: 0}}", "{labels: {PASS: 1, FAIL: 0}, read: last_lines}"),
     "read 'last_lines' is not a reading (did you mean 'last_line'?)"),
    (USER_TEMPLATE.replace("{labels: {PASS: 1, FAIL: 0}}", "{labels: {PASS: 1, FAIL: 0}, read: first_number}"), "read 'first_number' reads ratings: give scale"),
])
def test_a_broken_user_template_file_is_refused_in_one_line_naming_it(ws, capsys, text, message):
    (ws.root / "runspecs" / "qa").mkdir(parents=True, exist_ok=True)
    (ws.root / "runspecs" / "qa" / "grader.yaml").write_text(text)
    questions(ws, count=1, judge_template="grader.yaml")
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "llm_judge_binary"]],
              judge_properties={"judge_model": "j", "judge_api_endpoint": "http://127.0.0.1:9/v1"})
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "grader.yaml" in err and message in err, err


def test_the_default_template_is_named_and_its_hash_follows_the_prompt_variant_used(ws):
    (ws.root / "prompts.yaml").write_text("judge_prompts:\n  llm_judge_binary:\n    reference_transcript:\n"
                                          "      Qwen3-32b: 'QWEN Q={question} R={reference} T={transcript} A={answer} say Rating: 1 or 0'\n")
    questions(ws, count=1)
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(lambda s, n: "Rating: 1") as j:
        assert run(ws, m, j, "llm_judge_binary", run_id="a", prompts_file="prompts.yaml") == 0
        assert run(ws, m, j, "llm_judge_binary", run_id="b", prompts_file="prompts.yaml", judge_extra={"judge_prompt_model_override": "Qwen3-32b"}) == 0
        assert j.requests[-1].text.startswith("QWEN Q=")
    a, b = final(ws, "a")["details"]["judge_template"], final(ws, "b")["details"]["judge_template"]
    assert a["name"] == b["name"] == "default" and a["sha256"] != b["sha256"]


def test_a_template_per_judge_metric_judges_each_metric_with_its_own(ws):
    questions(ws, count=2, judge_template={"llm_judge_binary": "au_harness_binary", "llm_judge_detailed": "au_harness_detailed"})
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(lambda s, n: '{"score": 1, "explanation": "ok"}') as j:
        ws.config([model(m.url)], [["qs", "llm_judge_binary"], ["qs", "llm_judge_detailed"]], output_dir=str(ws.root / "runs"),
                  judge_properties={"judge_model": "judge-1", "judge_api_endpoint": j.url, "judge_concurrency": 1, "judge_retry_attempts": 0})
        assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"]) == 0
        systems = {s.system for s in j.requests}
    assert systems == {shipped()["au_harness_binary"].system, shipped()["au_harness_detailed"].system}
    scores = {s["metric"]: s for s in json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"]}
    assert scores["llm_judge_binary"]["details"]["judge_template"]["name"] == "au_harness_binary"
    assert scores["llm_judge_detailed"]["details"]["judge_template"]["name"] == "au_harness_detailed"
    assert scores["llm_judge_binary"]["score"] == 100.0 and scores["llm_judge_detailed"]["score"] == pytest.approx(20.0)


def test_a_judge_metric_the_mapping_does_not_name_uses_the_default_template(ws, capsys):
    questions(ws, count=1, judge_template={"llm_judge_binary": "kimi_yes_no"})
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "llm_judge_binary"], ["qs", "llm_judge_detailed"]],
              judge_properties={"judge_model": "j", "judge_api_endpoint": "http://127.0.0.1:9/v1"})
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert next(line for line in lines if "qs × llm_judge_binary" in line).endswith(", judge template kimi_yes_no)")
    assert next(line for line in lines if "qs × llm_judge_detailed" in line).endswith(", judge template default)")


def test_a_mapped_template_that_does_not_fit_its_metric_is_refused_naming_the_metric(ws, capsys):
    questions(ws, count=1, judge_template={"llm_judge_binary": "au_harness_detailed"})
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "llm_judge_binary"]],
              judge_properties={"judge_model": "j", "judge_api_endpoint": "http://127.0.0.1:9/v1"})
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert ("dataset 'qs': judge_template.llm_judge_binary: judge template 'au_harness_detailed' rates on a 0-5 scale "
            "and fits llm_judge_detailed, not llm_judge_binary") in err


@pytest.mark.parametrize("value, message", [
    ({"llm_judge_binay": "kimi_yes_no"}, "judge_template: 'llm_judge_binay' is not a judge metric (did you mean 'llm_judge_binary'?)"),
    ({}, "judge_template: the mapping names no judge metric (llm_judge_binary, llm_judge_detailed)"),
    ({"llm_judge_detailed": " "}, "judge_template.llm_judge_detailed: give a template name or file"),
    ("", "judge_template: give a template name or file"),
])
def test_a_judge_template_mapping_must_name_judge_metrics_and_templates(ws, capsys, value, message):
    questions(ws, count=1, judge_template=value)
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "bleu"]])
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "questions.json: dataset 'qs': " + message in err


@pytest.mark.parametrize("command", ["validate", "run"])
def test_an_unknown_prompt_model_override_is_refused_naming_the_key_and_the_known_variants(ws, capsys, command):
    (ws.root / "prompts.yaml").write_text("judge_prompts:\n  llm_judge_binary:\n    reference:\n"
                                          "      Qwen3-32b: 'Q={question} R={reference} A={answer}'\n")
    questions(ws, count=1)
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "llm_judge_binary"]], prompts_file="prompts.yaml",
              judge_properties={"judge_model": "j", "judge_api_endpoint": "http://127.0.0.1:9/v1", "judge_prompt_model_override": "Qwen3-23b"})
    assert main([command, "--config", str(ws.root / "config.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert ("judge_properties.judge_prompt_model_override: no judge prompt variant for 'Qwen3-23b' (did you mean 'Qwen3-32b'?); "
            "known variants: Qwen3-32b") in err


def test_misread_ratings_of_the_old_parser_fail_or_read_right_in_a_run(ws):
    """'Rating (0-5): 4' is 4, not the 0 of the echoed scale; 'Rating: -1' is not 1 but a failure quoting the reply."""
    questions(ws, count=3)
    replies = ["Explanation: fine.\nRating (0-5): 4", "Explanation: bad.\nRating: -1", "Explanation: both.\nRating: 2\nRating: 3"]
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(by_question(replies)) as j:
        assert run(ws, m, j, "llm_judge_detailed") == 3
    per_sample = sample_scores(ws, "llm_judge_detailed")
    assert per_sample["q0"]["score"] == 80.0 and per_sample["q0"]["rating"] == 4
    assert per_sample["q1"]["judge_failed"] == 'rating outside the scale: -1 in "Rating: -1" (the scale is 0-5)'
    assert per_sample["q1"]["judgment"] == replies[1]
    assert per_sample["q2"]["judge_failed"].startswith("ambiguous judgment: two different ratings")
    score = final(ws)
    assert score["num_failed"] == 2 and score["details"]["judge_failures"] == {"rating outside the scale": 1, "ambiguous judgment": 1}


def test_validate_names_the_judge_template_of_each_judged_pair(ws, capsys):
    questions(ws, count=1, judge_template="au_harness_detailed")
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "llm_judge_detailed"], ["qs", "bleu"]],
              judge_properties={"judge_model": "j", "judge_api_endpoint": "http://127.0.0.1:9/v1"})
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert next(line for line in lines if "qs × llm_judge_detailed" in line).endswith(", judge template au_harness_detailed)")
    assert "judge template" not in next(line for line in lines if "qs × bleu" in line)


def test_step2_paralinguistic_asks_its_chinese_task_prompt_and_judges_with_lmms_evals_semantic_match(ws):
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(3)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "textual_input_column": "question",
                                          "audio_column": None, "language": "zh", "protocol": "lmms", "judge_template": "lmms_step2_gender",
                                          "instruction": CATALOG_STEP2["instruction"]}})
    replies = {"answer 0": "yes", "answer 1": "NO", "answer 2": " no\n"}  # the whole reply, stripped, in any case
    with ScriptedEndpoint(answer_by_number) as m, \
            ScriptedEndpoint(lambda s, n: replies[re.search(r"文本1: (answer \d)", s.text).group(1)]) as j:
        assert run(ws, m, j, "llm_judge_binary") == 0
        seen = sorted(j.requests, key=lambda s: s.text)
        asked = [r.text for r in m.requests]
    assert CATALOG_STEP2["instruction"] == "请根据音频中说话人的声音特征，判断说话人的性别。" and all(CATALOG_STEP2["instruction"] in t for t in asked)
    template = shipped()["lmms_step2_gender"]
    assert seen[0].text == template.prompt.format(text1="answer 0", text2="answer 0") and seen[0].system == "你是一个专业的文本评估助手"
    assert seen[0].body["temperature"] == 0.0
    score = final(ws)
    assert score["score"] == pytest.approx(100 / 3) and score["details"]["num_judge_failed"] == 0


def _step2_gender() -> dict:
    from lalmeval.catalog.runspecs import BUILTIN_DIR

    return json.loads((BUILTIN_DIR / "paralinguistics" / "step_audio_paralinguistic.json").read_text(encoding="utf-8"))["step2_audio_paralinguistic_gender"]


CATALOG_STEP2 = _step2_gender()


def test_mixeval_freeform_sends_mixevals_eval_prompt_and_prints_the_mean_of_its_half_points(ws):
    questions(ws, count=3, judge_template="mixeval_freeform")
    replies = ["1", "0.5", "Point: 0"]
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(lambda s, n: replies[int(re.search(r"ground truth: answer (\d)", s.text).group(1))]) as j:
        assert run(ws, m, j, "llm_judge_detailed") == 0
        seen = sorted(j.requests, key=lambda s: s.text)
    assert seen[0].text == shipped()["mixeval_freeform"].prompt.format(model_response="answer 0", ground_truth="answer 0")
    assert seen[0].system is None and (seen[0].body["temperature"], seen[0].body["max_tokens"]) == (0.2, 1024)
    assert final(ws)["score"] == pytest.approx(0.5)  # (1 + 0.5 + 0) / 3, as lmms-eval prints it


def test_au_harness_binary_json_reads_the_judge_as_au_harness_does_at_its_temperature_and_keeps_lalmevals_reading_beside(ws):
    questions(ws, judge_template="au_harness_binary_json")
    replies = ['{"score": 1, "explanation": "same emotion"}', '{"score": "0", "explanation": "another emotion"}',
               '```json\n{"score": 1, "explanation": "fenced"}\n```']  # AU-Harness's json.loads fails on the fence: a failure here
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(lambda s, n: replies[int(s.text[-1])]) as j:
        run(ws, m, j, "llm_judge_binary")
        assert {r.body["temperature"] for r in j.requests} == {0.1}
    score = final(ws)
    assert score["score"] == pytest.approx(50.0) and score["details"]["num_judge_failed"] == 1
    own = score["details"]["lalmeval"]  # lalmeval's grammar reads all three
    assert own["read"] == 3 and own["score"] == pytest.approx(100 * 2 / 3) and "json_object" in own["differs_by"]


AU_JUDGE = json.loads((Path(__file__).parent / "fixtures" / "peer_scores" / "au_judge.json").read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", AU_JUDGE, ids=[c["metric"] for c in AU_JUDGE])
def test_au_harness_json_templates_print_what_au_harness_prints_for_the_same_judge_replies(ws, case):
    questions(ws, count=len(case["replies"]), judge_template=case["template"])
    with ScriptedEndpoint(answer_by_number) as m, \
            ScriptedEndpoint(lambda s, n: case["replies"][int(re.search(r"(\d+)\s*$", s.text).group(1))]) as j:
        assert run(ws, m, j, case["metric"], judge_extra={"judge_temperature": 0.0}) == 0
        assert {r.body["temperature"] for r in j.requests} == {case["temperature"]}  # AU-Harness's, over the config's
    score = final(ws)
    assert score["score"] == case["printed"]  # its mean rounded to 3 decimals, then the printed number to 2
    assert sorted(x["rating"] for x in sample_scores(ws, case["metric"]).values()) == sorted(int(v) for v in case["scores"])


AUDIOBENCH = json.loads((Path(__file__).parent / "fixtures" / "peer_scores" / "audiobench.json").read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", AUDIOBENCH, ids=[f"{c['template']}-{i}" for i, c in enumerate(AUDIOBENCH)])
def test_audiobench_templates_read_replies_as_lmms_eval_does_under_its_protocols_only(case):
    template = resolve(case["template"], "llm_judge_detailed", Path("."), {}, "")
    for protocol in ("lmms", "lmms_v0.3@1"):
        reading = read_verdict(case["reply"], template.verdict_under(protocol))
        assert reading.value == case["peer"] and (reading.problem is None) == (case["peer"] is not None)
    assert template.verdict_under("lalmeval").read == template.verdict_under("kimi").read == "statement"


LMMS_JUDGES = json.loads((Path(__file__).parent / "fixtures" / "peer_scores" / "lmms_judges.json").read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", LMMS_JUDGES, ids=[f"{c['template']}-{i}" for i, c in enumerate(LMMS_JUDGES)])
def test_lmms_judge_templates_read_what_lmms_evals_own_code_reads_and_fail_where_it_would_score_0(case):
    metric = "llm_judge_binary" if case["template"].startswith(("lmms_step2", "lmms_voicebench_sd_qa")) else "llm_judge_detailed"
    template = resolve(case["template"], metric, Path("."), {}, "")
    reading = read_verdict(case["reply"], template.verdict_under("lmms"))
    rating = int(case["peer"]) if case["peer"] in (0, 1) and template.binary else case["peer"]
    rating = rating * (2 if template.verdict.read == "first_number_in_halves" else 1)
    verdict = template.verdict
    on_scale = case["read"] and rating == int(rating) and verdict.binary or (case["read"] and rating == int(rating) and verdict.low <= rating <= verdict.high)
    assert reading.value == (int(rating) if on_scale else None)  # never a number the peer's reading did not find


KIMI_JUDGES = json.loads((Path(__file__).parent / "fixtures" / "peer_scores" / "kimi_judges.json").read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", KIMI_JUDGES, ids=[c["template"] for c in KIMI_JUDGES])
def test_kimi_templates_print_what_kimis_own_code_prints_for_the_same_judge_replies(ws, case):
    extra = {"target_column": None} if case["template"] == "kimi_open_qa" else {}
    questions(ws, count=len(case["replies"]), judge_template=case["template"], protocol="kimi", **extra)
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(by_question(case["replies"])) as j:
        code = run(ws, m, j, case["metric"])
        assert {r.body["temperature"] for r in j.requests} == {case["temperature"]}
    assert code == (3 if None in case["peer"] else 0)  # replies Kimi leaves out are judge failures, retryable here
    score = final(ws)
    assert score["score"] == pytest.approx(case["printed"], abs=0.005)  # Kimi leaves its invalid replies out
    assert score["details"]["num_judge_failed"] == sum(p is None for p in case["peer"])
    got = sample_scores(ws, case["metric"])
    assert [got[f"q{i}"].get("rating") for i in range(len(case["replies"]))] == case["peer"]


def test_kimi_open_qa_keeps_lalmevals_reading_beside_kimis_and_reads_its_own_way_elsewhere():
    template = resolve("kimi_open_qa", "llm_judge_detailed", Path("."), {}, "")
    assert read_verdict("Score: 4", template.verdict_under("kimi")).value is None  # Kimi: invalid, left out
    assert read_verdict("Score: 4", template.verdict_under("lalmeval")).value == 4
    assert read_verdict("[[2]] off-topic. On reflection [[3]]", template.verdict_under("kimi")).value == 2
    assert read_verdict("7", template.verdict_under("kimi")).problem.startswith("rating outside the scale")


AU_JUDGES = {c["template"]: c for c in json.loads((Path(__file__).parent / "fixtures" / "peer_scores" / "au_judges.json").read_text(encoding="utf-8"))["cases"]}


@pytest.mark.parametrize("name", sorted(AU_JUDGES))
def test_au_harness_judge_templates_read_each_reply_as_au_harnesss_own_code_reads_it_under_its_protocol(name):
    case = AU_JUDGES[name]
    template = resolve(name, case["metric"], Path("."), {}, "")
    readings = [read_verdict(reply, template.verdict_under("au_harness")) for reply in case["replies"]]
    low, high = (0, 1) if template.binary else (template.verdict.low, template.verdict.high)
    on_scale = [p if p is not None and low <= p <= high else None for p in case["peer"]]  # AU-Harness's 0 for "no number", its 11
    assert [r.value for r in readings] == [None if p is None else (int(p) if p == int(p) else p) for p in on_scale]
    assert template.generation["temperature"] == case["temperature"]
    assert template.verdict_under("lalmeval").read == "statement"  # lalmeval's own grammar elsewhere, and beside the peer's


@pytest.mark.parametrize("name", ["au_harness_redteaming", "au_harness_big_bench_audio"])
def test_au_harness_binary_judges_print_what_au_harness_prints_for_the_same_replies(ws, name):
    case = AU_JUDGES[name]
    replies = case["replies"] if name.endswith("big_bench_audio") else [r for r, p in zip(case["replies"], case["peer"]) if p is not None]
    questions(ws, count=len(replies), judge_template=name, protocol="au_harness")
    with ScriptedEndpoint(answer_by_number) as m, ScriptedEndpoint(lambda s, n: replies[int(re.search(r"(\d+)\D*$", s.text).group(1))]) as j:
        code = run(ws, m, j, case["metric"], judge_extra={"judge_temperature": 0.0})
        assert {r.body["temperature"] for r in j.requests} == {case["temperature"]}  # AU-Harness's, over the config's
    assert code == (3 if len(replies) > sum(p is not None for p in case["peer"]) else 0)
    score = final(ws)
    assert score["score"] == pytest.approx(case["printed"], abs=0.005) and "lalmeval" in score["details"]


def test_au_harness_mt_bench_prints_what_au_harness_prints_for_the_same_turn_ratings():
    case = AU_JUDGES["au_harness_mt_bench"]
    template = resolve("au_harness_mt_bench", "llm_judge_detailed", Path("."), {}, "")
    ratings = [r.value for r in (read_verdict(reply, template.verdict_under("au_harness")) for reply in case["replies"]) if r.value is not None]
    dialogues = [ratings[i:i + 3] for i in range(0, len(ratings), 3)]
    assert len(dialogues) == case["dialogues"]
    printed = sum(template.printed(sum(d) / len(d)) for d in dialogues) / len(dialogues)  # as LLMJudge scores a dialogue's turns
    assert printed == pytest.approx(case["printed"], abs=0.01)
