"""Endpoint behaviour: retries, Retry-After, timeouts, in-flight limit and request spacing."""

import pytest

from lalmeval.inference.client import backoff, retry_after
from tests.support.endpoint import Reply, ScriptedEndpoint, answer_by_number, chat_payload
from tests.support.workspace import demo_rows, model


def dataset(ws, count):
    rows = ws.copy_demo_audio(demo_rows(count))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})


def run(ws, handler, latency=0.0, **settings):
    with ScriptedEndpoint(handler, latency=latency) as ep:
        ws.config([model(ep.url, **settings)], [["cmds", "word_error_rate"]])
        result = ws.run()
    return ep, result, ws.records("cmds", "m")


def run_text(ws, handler, latency=0.0, **settings):
    with ScriptedEndpoint(handler, latency=latency) as ep:
        ws.config([model(ep.url, **settings)], [["qs", "accuracy"]])
        result = ws.run()
    return ep, result, ws.records("qs", "m")


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


def test_recorded_latency_is_the_endpoints_own_and_the_wait_for_a_slot_is_queued(ws):
    """A 200 ms endpoint and batch_size 2, with more samples ready than slots: `latency` is the time from the
    request leaving to the reply read (never less than the server's 200 ms), `queued` the time a sample waited
    for one of the two slots. Before, latency held both: the report plotted lalmeval's queue, not the endpoint."""
    ws.text_questions(12)
    ep, _, records = run_text(ws, answer_by_number, latency=0.2, batch_size=2)
    latencies = sorted(r["latency"] for r in records)
    queued = sorted(r["queued"] for r in records)
    assert len(records) == 12 and ep.max_in_flight == 2
    assert latencies[0] >= 0.2                           # the server sleeps 0.2 s before it answers
    assert queued[-1] > 0.1 and sum(queued) > 0          # six workers, two slots: most samples waited
    median = lambda xs: xs[len(xs) // 2]  # noqa: E731
    assert median(latencies) < median(sorted(r["latency"] + r["queued"] for r in records))
    # The report plots the endpoint's latency: its p50 marker is the records' latency, not latency + queued.
    from lalmeval.reports.plots import percentile

    html = (ws.root / "runs" / "t" / "report.html").read_text()
    assert f"p50 {percentile(latencies, 0.5):.3g} s" in html
    assert f"p50 {percentile([r['latency'] + r['queued'] for r in records], 0.5):.3g} s" not in html


def test_a_retried_request_records_its_last_attempts_latency_and_the_pause_before_it_apart(ws):
    ws.text_questions(1)
    script = lambda seen, n: Reply(status=503, payload={}, headers={"Retry-After": "2"}) if n == 0 else Reply(payload=chat_payload("answer 0"), delay=0.2)
    ep, _, records = run_text(ws, script, retry_attempts=1)
    record = records[0]
    assert record["attempts"] == 2 and record["retry_wait"] == 2.0
    # The 2 s pause is not latency: the last attempt took the server's 0.2 s (ten times less than the pause).
    assert 0.2 <= record["latency"] < record["retry_wait"]
