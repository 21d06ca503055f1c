"""Absurd inputs fail their own sample at once, with the reason: a reference over the documented size
limit, usage numbers that are no counts (Infinity, NaN, 1e400, 1e300, fractions, negative) from an endpoint."""

from __future__ import annotations

import json

import pytest

from lalmeval.data.cells import MAX_REFERENCE_CHARS
from tests.support.endpoint import Reply, ScriptedEndpoint, answer_by_number, chat_payload
from tests.support.workspace import model


def test_a_reference_over_the_size_limit_fails_its_sample_at_once_and_the_others_are_scored(ws):
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(3)]
    rows[1]["reference"] = "word " * (MAX_REFERENCE_CHARS // 5 + 1)
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url)], [["qs", "word_error_rate"]])
        result = ws.run()
    errors = {r["id"]: r["error"] for r in ws.records("qs", "m")}
    assert errors["q0"] is None and errors["q2"] is None
    assert errors["q1"] == (f"data: reference: the reference is {len(rows[1]['reference']):,} characters, "
                            f"over the limit of {MAX_REFERENCE_CHARS:,}")
    assert len(ep.requests) == 2 and result.failed_samples == 1
    score = result.scores[0]
    assert (score.num_samples, score.num_failed, score.score) == (3, 1, 0.0)


@pytest.mark.parametrize("raw_value", ["Infinity", "-Infinity", "NaN", "1e400", "-3", "1e300", "2.5"])
def test_a_usage_number_that_is_no_count_fails_its_sample_with_the_reason(ws, raw_value):
    ws.text_questions(2)

    def reply(seen, n):
        if "question 0" in seen.text:
            body = json.dumps(chat_payload("answer 0"))[:-1] + f', "usage": {{"prompt_tokens": {raw_value}, "completion_tokens": 2}}}}'
            return Reply(raw=body.encode())
        return answer_by_number(seen, n)

    with ScriptedEndpoint(reply) as ep:
        ws.config([model(ep.url, retry_attempts=1)], [["qs", "word_error_rate"]])
        result = ws.run()
    errors = {r["id"]: r["error"] for r in ws.records("qs", "m")}
    assert errors["q1"] is None
    assert errors["q0"].startswith("bad reply: usage.prompt_tokens is ") and errors["q0"].endswith(", not a count of tokens"), errors["q0"]
    assert result.failed_samples == 1 and len(ep.requests) >= 2


def test_a_usage_detail_that_is_no_count_fails_its_sample_naming_the_detail_and_good_details_are_counted(ws):
    ws.text_questions(2)

    def reply(seen, n):
        details = '{"audio_tokens": Infinity}' if "question 0" in seen.text else '{"audio_tokens": 5, "cached_tokens": 1}'
        body = json.dumps(chat_payload(f"answer {seen.text[-1]}"))[:-1]
        return Reply(raw=(body + f', "usage": {{"prompt_tokens": 7, "completion_tokens": 2, "prompt_tokens_details": {details}}}}}').encode())

    with ScriptedEndpoint(reply) as ep:
        ws.config([model(ep.url, retry_attempts=1)], [["qs", "word_error_rate"]])
        result = ws.run()
    records = {r["id"]: r for r in ws.records("qs", "m")}
    assert records["q0"]["error"] == "bad reply: usage.prompt_tokens_details.audio_tokens is inf, not a count of tokens"
    assert records["q1"]["error"] is None
    assert records["q1"]["usage"]["prompt_audio_tokens"] == 5 and records["q1"]["usage"]["prompt_cached_tokens"] == 1
    assert result.failed_samples == 1
