"""Tokens and cost: usage summed per score, per model, for the judge and for the run; prices; a budget that stops a run cleanly."""

import json
import re
import shlex

import pytest

from lalmeval.cli.commands import main
from tests.support.endpoint import Reply, ScriptedEndpoint, chat_payload
from tests.support.noisy_model import NoisyModel, noisy_datasets
from tests.support.workspace import model

NAMES = ["set0", "set1"]
PRICE = {"input_per_mtok": 2.5, "output_per_mtok": 10.0, "audio_input_per_mtok": 40.0}


def records(ws, run_id, dataset):
    path = ws.root / "runs" / run_id / "records" / f"{dataset}__m.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def final(ws, run_id):
    return json.loads((ws.root / "runs" / run_id / "final_scores.json").read_text())


def with_audio_tokens(handler):
    """Usage as OpenAI reports audio input: part of prompt_tokens, broken down in prompt_tokens_details."""
    def reply(seen, n):
        answer = handler(seen, n)
        answer.payload["usage"]["prompt_tokens_details"] = {"audio_tokens": 3 + n % 4}
        answer.payload["usage"]["prompt_tokens"] += 3 + n % 4
        answer.payload["usage"]["total_tokens"] += 3 + n % 4
        return answer
    return reply


def test_summed_tokens_equal_the_sum_of_the_records_usage_and_a_priced_run_costs_exactly_that(ws):
    references = noisy_datasets(ws, NAMES, 25)
    with ScriptedEndpoint(with_audio_tokens(NoisyModel(references, 1))) as ep:
        ws.config([model(ep.url, price=PRICE)], [[n, m] for n in NAMES for m in ("word_error_rate", "accuracy")])
        ws.run("u")
    data = final(ws, "u")
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "prompt_audio_tokens": 0}
    for name in NAMES:
        sums = {key: sum(r["usage"][key] for r in records(ws, "u", name)) for key in totals}
        for score in (s for s in data["scores"] if s["dataset"] == name):   # every metric of a dataset scores the same records
            assert {key: score["usage"][key] for key in totals} == sums
        totals = {key: totals[key] + sums[key] for key in totals}
    assert {key: data["usage"][key] for key in totals} == totals
    assert data["usage"]["total_tokens"] == totals["prompt_tokens"] + totals["completion_tokens"]
    expected = ((totals["prompt_tokens"] - totals["prompt_audio_tokens"]) * 2.5 + totals["prompt_audio_tokens"] * 40.0
                + totals["completion_tokens"] * 10.0) / 1e6
    assert data["cost"]["total"] == pytest.approx(expected, rel=1e-12) and data["cost"]["models"]["m"] == data["cost"]["total"]
    page = (ws.root / "runs" / "u" / "report.html").read_text()
    assert f"{totals['prompt_tokens']:,} prompt" in page and f"cost {data['cost']['total']:.6g}" in page


def test_judge_tokens_are_summed_per_score_and_in_the_run_total(ws):
    ws.text_questions(6)
    judge_usage = {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}
    judge = lambda seen, n: Reply(payload={**chat_payload("Rating: 1"), "usage": judge_usage})
    answer = lambda seen, n: Reply(payload={**chat_payload(f"answer {seen.text.split()[-1]}"),
                                            "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}})
    with ScriptedEndpoint(answer) as ep, ScriptedEndpoint(judge) as j:
        ws.config([model(ep.url, price=PRICE)], [["qs", "llm_judge_binary"]],
                  judge_properties={"judge_model": "j", "judge_api_endpoint": j.url, "judge_price": {"input_per_mtok": 1.0, "output_per_mtok": 3.0}})
        ws.run("j")
        judged = len(j.requests)
    data = final(ws, "j")
    score = data["scores"][0]
    assert judged == 6 and score["judge_usage"]["prompt_tokens"] == 6 * 50 and score["usage"]["prompt_tokens"] == 6 * 7
    assert data["usage"]["judge"]["completion_tokens"] == 6 * 5
    assert data["usage"]["prompt_tokens"] == 6 * (50 + 7) and data["usage"]["completion_tokens"] == 6 * (5 + 2)
    assert data["cost"]["judge"] == pytest.approx(6 * (50 * 1.0 + 5 * 3.0) / 1e6)
    assert data["cost"]["total"] == pytest.approx(data["cost"]["judge"] + 6 * (7 * 2.5 + 2 * 10.0) / 1e6)
    assert score["cost"] == pytest.approx(data["cost"]["total"])


def test_a_budget_stop_records_not_run_samples_exits_non_zero_and_its_resume_hint_reaches_the_unstopped_scores(ws, capsys, monkeypatch):
    references = noisy_datasets(ws, NAMES, 30)
    monkeypatch.chdir(ws.root)
    with ScriptedEndpoint(NoisyModel(references, 1)) as ep:
        pairs = [[n, "word_error_rate"] for n in NAMES]
        ws.config([model(ep.url, batch_size=1, price=PRICE)], pairs)
        assert main(["run", "--config", "config.yaml", "--run-id", "whole"]) == 0
        ws.config([model(ep.url, batch_size=1, price=PRICE)], pairs, max_run_tokens=400)
        capsys.readouterr()
        code = main(["run", "--config", "config.yaml", "--run-id", "cut"])
        err = capsys.readouterr().err
        assert code == 3 and "stopped at the budget" in err and "Raise max_cost / max_run_tokens" in err
        stopped = final(ws, "cut")
        assert stopped["stopped"].startswith("stopped at the budget") and stopped["interrupted"]
        sent = sum(len(records(ws, "cut", name)) for name in NAMES)
        assert sent < 60 and all(not r["error"] for name in NAMES for r in records(ws, "cut", name))
        # The samples not sent are counted as not run (a kind of their own, not a failure) and never scored.
        assert {f["kind"] for f in stopped["failures"]} == {"interrupted"} and sum(f["count"] for f in stopped["failures"]) == 60 - sent
        assert sum(s["num_samples"] - s["num_failed"] for s in stopped["scores"]) == sent
        # The printed hint, followed: raise the budget, then the printed command.
        ws.config([model(ep.url, batch_size=1, price=PRICE)], pairs, max_run_tokens=10**9)
        command = re.search(r"resume with: (.+)$", err, re.MULTILINE).group(1)
        assert main(shlex.split(command)[1:]) == 0
    resumed, whole = final(ws, "cut"), final(ws, "whole")
    keys = ("dataset", "metric", "score", "ci95", "num_samples", "num_failed", "usage")
    assert [{k: s[k] for k in keys} for s in resumed["scores"]] == [{k: s[k] for k in keys} for s in whole["scores"]]
    assert resumed["usage"]["total_tokens"] == whole["usage"]["total_tokens"] and resumed["cost"] == whole["cost"]


def test_the_python_api_returns_the_runs_usage_and_cost(ws):
    import lalmeval

    ws.text_questions(4)
    answer = lambda seen, n: Reply(payload={**chat_payload(f"answer {seen.text.split()[-1]}"),
                                            "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}})
    with ScriptedEndpoint(answer) as ep:
        ws.config([model(ep.url, price=PRICE)], [["qs", "word_error_rate"]])
        found = lalmeval.evaluate(ws.root / "config.yaml", output_dir=ws.root / "runs", quiet=True)
    assert found.usage["prompt_tokens"] == 4 * 7 and found.cost["total"] == pytest.approx(4 * (7 * 2.5 + 2 * 10.0) / 1e6)
