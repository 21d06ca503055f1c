"""LLM judges against a local judge double: scores, what the judge sees, failures, pipelining, cache."""

import csv
import json
import re

import pytest

from lalmeval.cli.commands import main
from lalmeval.errors import UserError
from lalmeval.config.options import RunOptions
from lalmeval.run.runner import run
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.workspace import demo_rows, model

QUESTIONS = ["What is asked?", "Which room?", "Which device?", "What time?", "Who is called?", "What is played?"]


def dataset(ws, count=6, reference=True, transcript=True):
    rows = ws.copy_demo_audio(demo_rows(count))
    for row, question in zip(rows, QUESTIONS):
        row["question"] = question
        if not reference:
            row.pop("reference")
    spec = {"hf_repo": ws.jsonl(rows), "id_column": "id", "additional_instruction_column": "question",
            "target_column": "reference" if reference else None, "transcript_column": "reference" if transcript else None}
    ws.runspec("qa", "spoken", {"qa_set": spec})
    return rows


def answering(rows, wrong_ids=()):
    """The model double: answers each clip with its reference, except for `wrong_ids`."""
    import soundfile as sf
    from tests.support.workspace import DEMO

    by_length = {sf.info(str(DEMO / "audio" / r["audio"].split("/")[-1])).frames / 16000: r for r in rows}
    return lambda seen, n: "no idea" if by_length[seen.audio_seconds[0]]["id"] in wrong_ids else by_length[seen.audio_seconds[0]].get("reference", "an answer")


def section(text, title):
    match = re.search(rf"\[{re.escape(title)}\]\n(.*?)(?:\n\n|\Z)", text, re.DOTALL)
    return match.group(1) if match else None


def binary_judge(seen, n):
    text = seen.text
    answer = section(text, "Model answer") or ""
    return f"Looks {'right' if answer == section(text, 'Reference answer') else 'wrong'}.\nRating: {int(answer == section(text, 'Reference answer'))}"


def judge_props(url, **extra):
    return {"judge_model": "judge-1", "judge_api_endpoint": url, "judge_concurrency": 4, **extra}


def go(ws, model_ep, judge_ep, metric, run_id="j", options=RunOptions(), judge_extra=None, **config):
    ws.config([model(model_ep.url, batch_size=2)], [["qa_set", metric]], judge_properties=judge_props(judge_ep.url, **(judge_extra or {})), **config)
    return run(ws.plan(), ws.root / "runs", run_id, quiet=True, options=options)


def scores_file(ws, metric, run_id="j"):
    path = ws.root / "runs" / run_id / "scores" / f"qa_set__{metric}__m.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_binary_judge_scores_percent_correct(ws):
    rows = dataset(ws)
    with ScriptedEndpoint(answering(rows, wrong_ids={rows[0]["id"], rows[1]["id"]})) as m, ScriptedEndpoint(binary_judge) as j:
        score = go(ws, m, j, "llm_judge_binary").scores[0]
    assert score.score == pytest.approx(100 * 4 / 6)
    assert score.details["num_judge_failed"] == 0 and score.details["variants"] == {"reference_transcript": 6}


def test_detailed_judge_reports_0_100_and_raw_mean(ws):
    dataset(ws, count=4)
    replies = iter(["Explanation: close.\nRating: 4", '{"score": 3, "why": "ok"}', "Rating: [[5]]", "**Rating:** 2"])
    with ScriptedEndpoint(lambda s, n: "x") as m, ScriptedEndpoint(lambda s, n: next(replies)) as j:
        score = go(ws, m, j, "llm_judge_detailed", judge_extra={"judge_concurrency": 1}).scores[0]
    assert score.details["raw_mean"] == pytest.approx(3.5)
    assert score.score == pytest.approx(70.0)


def test_judge_sees_question_reference_transcript_and_answer(ws):
    rows = dataset(ws, count=2)
    with ScriptedEndpoint(lambda s, n: "the model's answer") as m, ScriptedEndpoint(lambda s, n: "Rating: 1") as j:
        go(ws, m, j, "llm_judge_binary")
        texts = [r.text for r in j.requests]
    for row in rows:
        text = next(t for t in texts if row["question"] in t)
        assert section(text, "Instruction given with the audio") == row["question"]
        assert section(text, "Transcript of the audio") == row["reference"]
        assert section(text, "Reference answer") == row["reference"]
        assert section(text, "Model answer") == "the model's answer"
        assert "{" not in text  # every placeholder was filled


def test_open_ended_tasks_get_the_no_reference_prompt(ws):
    dataset(ws, count=3, reference=False, transcript=False)
    with ScriptedEndpoint(lambda s, n: "an answer") as m, ScriptedEndpoint(lambda s, n: "Rating: 5") as j:
        score = go(ws, m, j, "llm_judge_detailed").scores[0]
        text = j.requests[0].text
    assert score.details["variants"] == {"open": 3} and score.score == 100.0
    assert "There is no reference answer" in text and "[Instruction]" in text


def test_binary_judge_without_reference_is_a_counted_failure(ws):
    dataset(ws, count=2, reference=False, transcript=False)
    with ScriptedEndpoint(lambda s, n: "x") as m, ScriptedEndpoint(lambda s, n: "Rating: 1") as j:
        score = go(ws, m, j, "llm_judge_binary").scores[0]
        assert j.requests == []
    # the judge is never asked; like every metric without a reference, the samples fail under that reason
    assert score.score is None and score.num_failed == 2 and score.details["failures"] == {"empty reference": 2}


def test_unparseable_and_failed_judgments_are_counted_not_zeroed(ws):
    dataset(ws, count=6)
    script = {0: "Rating: 1", 1: "I think this is fine.", 2: "Rating: 7", 3: Reply(status=500, payload={"error": {"message": "judge down"}}), 4: "Rating: 0", 5: "Rating: 1"}
    with ScriptedEndpoint(lambda s, n: "x") as m, ScriptedEndpoint(lambda s, n: script[n]) as j:
        score = go(ws, m, j, "llm_judge_binary", judge_extra={"judge_concurrency": 1, "judge_retry_attempts": 0}).scores[0]
    assert score.details["num_judge_failed"] == 3 and score.details["judged"] == 3
    assert score.score == pytest.approx(100 * 2 / 3)  # not 2/6
    # Inference did not fail, but three samples have no score: they are failed samples (README: num_failed).
    assert score.num_failed == 3 and score.details["failures"] == {"judge failed": 3}
    failed = [x for x in scores_file(ws, "llm_judge_binary") if x.get("judge_failed")]
    reasons = sorted(x["judge_failed"] for x in failed)
    assert reasons == ["judge request failed: HTTP 500: judge down", 'rating outside the scale: 7 in "Rating: 7" (the scale is 0 or 1)',
                       "unparseable judgment: no rating (0 or 1) found"]
    assert any(x.get("judgment") == "I think this is fine." for x in failed)


def test_judging_starts_while_inference_is_still_running(ws):
    dataset(ws, count=6)
    with ScriptedEndpoint(lambda s, n: Reply(payload={"choices": [{"message": {"content": "x"}}]}, delay=0.2)) as m, ScriptedEndpoint(lambda s, n: "Rating: 1") as j:
        ws.config([model(m.url, batch_size=1)], [["qa_set", "llm_judge_binary"]], judge_properties=judge_props(j.url))
        ws.run()
        assert j.requests[0].started < m.requests[-1].started


def test_rescoring_the_same_predictions_makes_no_judge_request(ws):
    dataset(ws, count=4)
    with ScriptedEndpoint(lambda s, n: "x") as m, ScriptedEndpoint(lambda s, n: f"Rating: {n % 2}") as j:
        first = go(ws, m, j, "llm_judge_binary")
        assert len(j.requests) == 4
        again = go(ws, m, j, "llm_judge_binary", options=RunOptions(reeval=True))
        assert len(j.requests) == 4 and len(m.requests) == 4
    assert again.scores[0].score == first.scores[0].score
    assert all(x["cached"] for x in scores_file(ws, "llm_judge_binary"))


def test_judge_settings_reach_the_judge_request(ws):
    dataset(ws, count=3)
    extra = {"judge_type": "vllm", "judge_api_key": "judge-secret-key-123", "judge_api_version": "2024-06-01",
             "judge_temperature": 0.3, "judge_max_tokens": 99, "judge_concurrency": 1}
    with ScriptedEndpoint(lambda s, n: "x") as m, ScriptedEndpoint(lambda s, n: Reply(payload={"choices": [{"message": {"content": "Rating: 1"}}]}, delay=0.05)) as j:
        go(ws, m, j, "llm_judge_binary", judge_extra=extra)
        seen = j.requests
    assert all(r.body["model"] == "judge-1" and r.body["temperature"] == 0.3 and r.body["max_tokens"] == 99 for r in seen)
    assert seen[0].headers["api-key"] == "judge-secret-key-123" and seen[0].query == {"api-version": "2024-06-01"}
    assert max(r.concurrent for r in seen) == 1
    for path in (ws.root / "runs").rglob("*"):
        if path.is_file():
            assert "judge-secret-key-123" not in path.read_text(errors="ignore"), path


def test_judge_timeout_and_retries_apply(ws):
    dataset(ws, count=1)
    script = lambda s, n: Reply(payload={"choices": [{"message": {"content": "Rating: 1"}}]}, delay=2 if n == 0 else 0)
    with ScriptedEndpoint(lambda s, n: "x") as m, ScriptedEndpoint(script) as j:
        score = go(ws, m, j, "llm_judge_binary", judge_extra={"judge_timeout": 0.3, "judge_retry_attempts": 1}).scores[0]
        assert len(j.requests) == 2
    assert score.score == 100.0


def test_prompt_model_override_and_user_prompt_files(ws):
    dataset(ws, count=1)
    (ws.root / "prompts.yaml").write_text(
        "judge_prompts:\n  llm_judge_binary:\n    reference_transcript:\n"
        "      Qwen3-32b: 'QWEN STYLE Q={question} R={reference} T={transcript} A={answer}'\n")
    with ScriptedEndpoint(lambda s, n: "x") as m, ScriptedEndpoint(lambda s, n: "Rating: 1") as j:
        go(ws, m, j, "llm_judge_binary", run_id="a", prompts_file="prompts.yaml")
        assert not j.requests[-1].text.startswith("QWEN STYLE")  # judge-1 has no variant of its own
        go(ws, m, j, "llm_judge_binary", run_id="b", prompts_file="prompts.yaml", judge_extra={"judge_prompt_model_override": "Qwen3-32b"})
        assert j.requests[-1].text.startswith("QWEN STYLE Q=")


@pytest.mark.parametrize("template,message", [
    ("Q={qestion} R={reference} T={transcript} A={answer}", "placeholder '{qestion}' cannot be filled (did you mean 'question'?)"),
    ("Q={question} R={reference} T={transcript}", "never shows '{answer}'"),
])
def test_unfillable_or_incomplete_templates_refuse_to_start(ws, template, message):
    dataset(ws, count=1)
    (ws.root / "prompts.yaml").write_text(f"judge_prompts:\n  llm_judge_binary:\n    reference_transcript:\n      default: '{template}'\n")
    ws.config([model("http://127.0.0.1:9/v1")], [["qa_set", "llm_judge_binary"]], judge_properties=judge_props("http://127.0.0.1:9/v1"), prompts_file="prompts.yaml")
    with pytest.raises(UserError, match=re.escape(message)):
        ws.plan()


def test_judge_metric_without_judge_properties_refuses_to_start(ws):
    dataset(ws, count=1)
    ws.config([model("http://127.0.0.1:9/v1")], [["qa_set", "llm_judge_detailed"]])
    with pytest.raises(UserError, match="metric 'llm_judge_detailed' needs judge_properties"):
        ws.plan()


# --- judged runs of text questions -------------------------------------------------------------


def questions(ws, rows, **spec):
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None, **spec}})


def text_rows(count):
    return [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(count)]


def answer(seen, n):
    return f"answer {seen.text.split()[-1]}"


def final(ws, run_id="t"):
    return json.loads((ws.root / "runs" / run_id / "final_scores.json").read_text())


def test_num_failed_counts_samples_whose_judgment_failed(ws, capsys):
    """Four samples answered; the judge rates two and returns no rating for the other two: the
    README defines num_failed as every sample without a prediction or a score, so it is 2 — in
    final_scores.json and results.csv alike — and the run exits 3, saying why they have no score."""
    questions(ws, text_rows(4))
    with ScriptedEndpoint(answer) as ep, ScriptedEndpoint(lambda seen, n: "Rating: 1" if n % 2 == 0 else "no idea") as judge_ep:
        ws.config([model(ep.url)], [["qs", "llm_judge_binary"]], output_dir=str(ws.root / "runs"),
                  judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url, "judge_concurrency": 1, "judge_retry_attempts": 0})
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
    score = final(ws)["scores"][0]
    assert score["details"]["judged"] == 2 and score["details"]["num_judge_failed"] == 2
    assert score["num_failed"] == 2, f"num_samples {score['num_samples']}, num_failed {score['num_failed']}, judged {score['details']['judged']}"
    assert score["num_samples"] == 4 and score["score"] == 100.0 and code == 3
    row = next(csv.DictReader((ws.root / "runs" / "t" / "results.csv").open()))
    assert row["num_failed"] == "2"
    assert "2 prediction(s) could not be scored (unparseable judgment: 2)" in capsys.readouterr().err


def test_the_printed_retry_command_retries_an_unparseable_judgment(ws, capsys):
    """The judge's first answer for one sample has no rating (cut short, say); asked again it
    answers properly. The run exits 3 and prints "Retry them with: ... --resume t"; running that
    asks the judge again for that sample only (the unusable judgment was not cached) and exits 0."""
    questions(ws, text_rows(2))
    asked: dict[str, int] = {}

    def judge(seen, n):
        key = seen.text.split("[Model Answer]")[-1] if "[Model Answer]" in seen.text else seen.text
        asked[key] = asked.get(key, 0) + 1
        return "The answer seems" if "answer 1" in key and asked[key] == 1 else "Rating: 1"

    with ScriptedEndpoint(answer) as ep, ScriptedEndpoint(judge) as judge_ep:
        ws.config([model(ep.url)], [["qs", "llm_judge_binary"]], output_dir=str(ws.root / "runs"),
                  judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url})
        first = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        assert first == 3 and "--resume t" in capsys.readouterr().err
        again = main(["run", "--config", str(ws.root / "config.yaml"), "--resume", "t"])
        judged = len(judge_ep.requests)
    assert again == 0, f"the retry exited {again}; judge requests in all: {judged} (the unparseable one was not asked again)"
    assert judged == 3  # the usable judgment came from the cache
    assert final(ws)["scores"][0]["score"] == 100.0


def test_an_unusable_judgment_already_in_the_cache_is_asked_again(ws):
    """A cache written by an older version may hold judgments without a rating: they are not reused."""
    questions(ws, text_rows(2))
    with ScriptedEndpoint(answer) as ep, ScriptedEndpoint(lambda seen, n: "Rating: 1") as judge_ep:
        ws.config([model(ep.url)], [["qs", "llm_judge_binary"]], output_dir=str(ws.root / "runs"),
                  judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url})
        assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"]) == 0
        cache = ws.root / "runs" / ".cache" / "judge_j.jsonl"
        entries = [json.loads(line) for line in cache.read_text().splitlines()]
        cache.write_text("".join(json.dumps({**e, "reply": "The answer see"}) + "\n" for e in entries))
        again = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t", "--reeval"])
        judged = len(judge_ep.requests)
    assert (again, judged) == (0, 4) and final(ws)["scores"][0]["score"] == 100.0


def test_a_sampled_judgment_is_reused_only_with_cache_sampled(ws):
    """judge_temperature > 0 samples: like a model's sampled reply, its judgment is asked again by a
    later run unless cache_sampled: true."""
    questions(ws, text_rows(2))
    with ScriptedEndpoint(answer) as ep, ScriptedEndpoint(lambda seen, n: "Rating: 1") as judge_ep:
        for run_id, cache_sampled in (("a", False), ("b", False), ("c", True), ("d", True)):
            ws.config([model(ep.url)], [["qs", "llm_judge_binary"]], output_dir=str(ws.root / "runs"), cache=True, cache_sampled=cache_sampled,
                      judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url, "judge_temperature": 0.5})
            ws.run(run_id)
        judged = len(judge_ep.requests)
    assert judged == 2 + 2 + 2  # a, b and c ask; d reuses c's judgments
