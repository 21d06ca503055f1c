"""Gateways as they really answer: every form of "wait before retrying", and Azure resource URLs."""

import asyncio

import pytest
from openai import AsyncAzureOpenAI

from lalmeval.inference import client
from lalmeval.inference.azure import deployment_url
from lalmeval.inference.waits import Wait, asked_wait, duration
from tests.support.endpoint import AnyPathEndpoint, Reply, ScriptedEndpoint, answer_by_number
from tests.support.workspace import model


def text_questions_config(ws, models, count):
    ws.text_questions(count)
    ws.config(models, [["qs", "accuracy"]])


def limited(headers):
    """A 429 carrying `headers` on the first request, then answers."""
    return lambda seen, n: Reply(status=429, payload={"error": {"message": "rate limited"}}, headers=headers) if n == 0 else "answer 0"


def run_once(ws, handler, **settings):
    with ScriptedEndpoint(handler) as ep:
        text_questions_config(ws, [model(ep.url, retry_attempts=2, **settings)], count=1)
        ws.run()
    return ep, ws.records("qs", "m")[0]


@pytest.mark.parametrize("headers, waited", [
    ({"Retry-After": "0.2"}, 0.2),                                         # the standard, in seconds
    ({"retry-after-ms": "150"}, 0.15),                                     # OpenAI / Azure, milliseconds
    ({"retry-after-ms": "150", "Retry-After": "1"}, 0.15),                 # the precise one wins
    ({"x-ratelimit-reset-requests": "120ms", "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "9000"}, 0.12),   # the used-up limit's reset
    ({"x-ratelimit-reset-tokens": "0.25s", "x-ratelimit-remaining-tokens": "0"}, 0.25),
    ({"llm_provider-retry-after": "0.3"}, 0.3),                            # LiteLLM relaying the provider's
    ({"llm_provider-x-ratelimit-reset-requests": "50ms", "llm_provider-x-ratelimit-remaining-requests": "0"}, 0.05),
])
def test_a_429_waits_what_each_gateway_header_asks(ws, headers, waited):
    ep, record = run_once(ws, limited(headers))
    assert len(ep.requests) == 2
    assert record["error"] is None and record["attempts"] == 2
    assert record["retry_wait"] == waited


def test_rate_limit_headers_of_a_limit_not_used_up_leave_the_wait_to_backoff(ws):
    headers = {"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-remaining-requests": "12"}
    ep, record = run_once(ws, limited(headers))
    assert record["error"] is None and 0 < record["retry_wait"] <= 0.5   # backoff's first step, not six minutes


@pytest.mark.parametrize("headers, shown", [({"Retry-After": "3600"}, "3,600s (retry-after)"),
                                           ({"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-remaining-requests": "0"},
                                            "360s (x-ratelimit-reset-requests)")])
def test_a_wait_beyond_the_runs_patience_fails_the_samples_at_once_saying_when_to_resume(ws, headers, shown):
    """Sleeping an hour would stall the run; retrying sooner would be refused again. The first sample fails with
    the server's wait and when to resume, the others without being sent; a resume after it succeeds."""
    later = {"open": False}
    handler = lambda seen, n: answer_by_number(seen, n) if later["open"] else Reply(status=429, headers=headers,
                                                                                   payload={"error": {"message": "rate limited"}})
    with ScriptedEndpoint(handler) as ep:
        text_questions_config(ws, [model(ep.url, retry_attempts=3, batch_size=1)], count=3)
        result = ws.run()
        errors = [r["error"] for r in ws.records("qs", "m")]
        assert len(ep.requests) == 1   # no retry, no second sample sent into the same refusal
        assert errors[0].startswith(f"HTTP 429: rate limited (the server asked to wait {shown} before a retry, more than "
                                    "the 300s a retry waits: resume the run after "), errors[0]
        assert all(e.startswith(f"endpoint down (it asked to wait {shown}, until ") for e in errors[1:]), errors
        assert result.failed_samples == 3
        later["open"] = True
        again = ws.run(fresh=False)
    latest = {r["id"]: r["error"] for r in ws.records("qs", "m")}   # a resume appends each sample's new record
    assert again.failed_samples == 0 and list(latest.values()) == [None] * 3 and len(ep.requests) == 4


def test_wait_forms_parse_as_their_senders_write_them():
    assert duration("6m0s") == 360 and duration("1h2m3.5s") == 3723.5 and duration("20ms") == 0.02 and duration("1s") == 1
    assert duration("2") == 2 and duration("1.5m") == 90 and duration("soon") is None and duration("5x") is None
    assert asked_wait({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == Wait(0.0, "retry-after")  # a date in the past
    assert asked_wait({"retry-after": "later"}) is None and asked_wait({}) is None
    both = {"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "3s"}   # nothing says which is used up: the later
    assert asked_wait(both) == Wait(3.0, "x-ratelimit-reset-tokens")


class AzureGateway(AnyPathEndpoint):
    """Answers chat completions on every path, as Azure does on a deployment's."""


def azure_paths(ws, url, **settings):
    with AzureGateway(lambda seen, n: "answer 0") as ep:
        text_questions_config(ws, [model(url.format(port=ep.port), model="my-deployment", auth_token="azure-key-123456", **settings)], count=1)
        ws.run()
    return ep.requests, ws.records("qs", "m")[0]


@pytest.mark.parametrize("root", ["http://127.0.0.1:{port}/", "http://127.0.0.1:{port}", "http://127.0.0.1:{port}/openai"])
def test_an_azure_resource_root_is_sent_to_its_deployment(ws, root):
    seen, record = azure_paths(ws, root, api_version="2024-10-21")
    assert record["error"] is None
    assert [(s.path, s.query) for s in seen] == [("/openai/deployments/my-deployment/chat/completions", {"api-version": "2024-10-21"})]
    assert seen[0].headers["api-key"] == "azure-key-123456" and "Authorization" not in seen[0].headers


@pytest.mark.parametrize("url, path", [
    ("http://127.0.0.1:{port}/openai/deployments/other", "/openai/deployments/other/chat/completions"),  # already a deployment
    ("http://127.0.0.1:{port}/openai/v1", "/openai/v1/chat/completions"),                              # the newer v1 form
])
def test_azure_urls_with_a_path_are_used_as_written(ws, url, path):
    seen, record = azure_paths(ws, url, api_version="preview")
    assert record["error"] is None and seen[0].path == path


def test_a_root_without_api_version_is_an_openai_style_base(ws):
    seen, _ = azure_paths(ws, "http://127.0.0.1:{port}")
    assert seen[0].path == "/chat/completions" and seen[0].headers["Authorization"] == "Bearer azure-key-123456"


def test_deployment_paths_match_the_openai_sdks_azure_client():
    """The SDK AU-Harness uses (azure_endpoint + a deployment as the model) posts where we post."""
    async def sdk_request(root):
        sdk = AsyncAzureOpenAI(azure_endpoint=root, api_version="2024-10-21", api_key="k" * 8, max_retries=0)
        await sdk.chat.completions.create(model="gpt-4o-audio", messages=[{"role": "user", "content": "hi"}])

    with AzureGateway(lambda seen, n: "hi") as ep:
        root = f"http://127.0.0.1:{ep.port}/"
        asyncio.run(sdk_request(root))
    assert ep.requests[0].path == deployment_url(root, "gpt-4o-audio", "2024-10-21").removeprefix(root.rstrip("/")) + "/chat/completions"


def test_a_judge_at_an_azure_resource_root_is_sent_to_its_deployment(ws):
    """AU-Harness configs give the judge the same way: judge_api_endpoint the root, judge_model the deployment."""
    ws.text_questions(2)
    with ScriptedEndpoint(answer_by_number) as ep, AzureGateway(lambda seen, n: "Rating: 1") as judge:
        ws.config([model(ep.url)], [["qs", "llm_judge_binary"]],
                  judge_properties={"judge_model": "judge-deployment", "judge_api_endpoint": f"http://127.0.0.1:{judge.port}/",
                                    "judge_api_version": "2024-10-21", "judge_api_key": "judge-key-123456"})
        result = ws.run()
    assert {(s.path, s.query["api-version"], s.headers["api-key"]) for s in judge.requests} == {
        ("/openai/deployments/judge-deployment/chat/completions", "2024-10-21", "judge-key-123456")}
    assert len(judge.requests) == 2 and result.scores[0].score == 100.0
