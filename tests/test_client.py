"""Endpoint behaviour: retries, Retry-After, timeouts, in-flight limit and request spacing."""

import pytest

from lalmeval.inference.client import backoff, retry_after
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.workspace import demo_rows, model


def dataset(ws, count):
    rows = ws.copy_demo_audio(demo_rows(count))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})


def run(ws, handler, latency=0.0, **settings):
    with ScriptedEndpoint(handler, latency=latency) as ep:
        ws.config([model(ep.url, **settings)], [["cmds", "word_error_rate"]])
        result = ws.run()
    return ep, result, ws.records("cmds", "m")


def test_429_with_retry_after_is_retried_after_the_given_wait(ws):
    dataset(ws, 1)
    script = lambda seen, n: Reply(status=429, payload={"error": {"message": "slow down"}}, headers={"Retry-After": "1"}) if n == 0 else "ok"
    ep, result, records = run(ws, script, retry_attempts=2)
    assert len(ep.requests) == 2
    assert ep.requests[1].started - ep.requests[0].started >= 0.95
    assert records[0]["error"] is None and records[0]["attempts"] == 2
    assert result.scores[0].num_failed == 0


def test_5xx_retried_until_attempts_run_out_then_recorded_with_reason(ws):
    dataset(ws, 1)
    ep, result, records = run(ws, lambda s, n: Reply(status=503, payload={"error": {"message": "overloaded"}}, headers={"Retry-After": "0"}), retry_attempts=2)
    assert len(ep.requests) == 3
    assert records[0]["error"] == "HTTP 503: overloaded" and records[0]["attempts"] == 3
    assert result.scores[0].num_failed == 1 and result.scores[0].score is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_fail_at_once_with_the_server_message(ws, status):
    dataset(ws, 1)
    ep, _, records = run(ws, lambda s, n: Reply(status=status, payload={"error": {"message": f"nope {status}"}}), retry_attempts=5)
    assert len(ep.requests) == 1
    assert records[0]["error"] == f"HTTP {status}: nope {status}"


def test_timeout_is_retried_then_recorded(ws):
    dataset(ws, 1)
    ep, _, records = run(ws, lambda s, n: Reply(payload={}, delay=3) if n == 0 else "late but fine", timeout=0.5, retry_attempts=1)
    assert len(ep.requests) == 2 and records[0]["prediction"] == "late but fine"
    ep, _, records = run(ws, lambda s, n: Reply(payload={}, delay=3), timeout=0.3, retry_attempts=0)
    assert records[0]["error"] == "timeout after 0.3s"


def test_unreachable_endpoint_is_recorded_as_connection_error(ws):
    dataset(ws, 2)
    ws.config([model("http://127.0.0.1:9/v1", retry_attempts=1)], [["cmds", "word_error_rate"]])
    result = ws.run()
    records = ws.records("cmds", "m")
    assert all(r["error"].startswith("connection error") for r in records)
    assert result.scores[0].num_failed == 2


def test_batch_size_caps_requests_in_flight(ws):
    dataset(ws, 12)
    ep, _, _ = run(ws, lambda s, n: "x", latency=0.2, batch_size=3)
    assert ep.max_in_flight == 3


def test_delay_spaces_request_starts(ws):
    dataset(ws, 5)
    ep, _, _ = run(ws, lambda s, n: "x", batch_size=5, delay=150)
    starts = sorted(r.started for r in ep.requests)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert min(gaps) >= 0.13


def test_retry_after_parses_seconds_and_dates_and_backoff_grows():
    assert retry_after("3") == 3.0
    assert retry_after(None) is None
    assert 0 <= retry_after("Wed, 21 Oct 2015 07:28:00 GMT") <= 1  # in the past: no wait
    assert backoff(1) <= 0.5 and 2.0 <= backoff(4) <= 4.0
