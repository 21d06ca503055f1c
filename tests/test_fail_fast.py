"""A dead or refusing endpoint is not sent the whole dataset: refusals stop it after a few requests (exit 2,
one line naming status, URL and fix), an all-5xx server is taken out, max_failure_rate stops a failing run,
and a broken replica leaves its work to the others. Every sample still ends as exactly one record."""

import json

import pytest

from lalmeval.cli.commands import main
from tests.support.endpoint import Reply, ScriptedEndpoint, answer_by_number
from tests.support.workspace import model

COUNT = 40


def cli(ws, *flags):
    return main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t", *flags])


def final(ws):
    return json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())


def error_lines(err):
    return [line for line in err.splitlines() if line.startswith("error:")]


def test_a_wrong_key_stops_the_pass_after_a_few_requests_with_one_line_naming_status_url_and_fix(ws, capsys):
    ws.text_questions(COUNT)
    refuse = lambda seen, n: Reply(status=401, payload={"error": {"message": "Incorrect API key provided"}})
    with ScriptedEndpoint(refuse) as ep:
        ws.config([model(ep.url, batch_size=4, auth_token="sk-wrong-0123456789")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
        sent = len(ep.requests)
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and sent <= 2 * 4, sent
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: model 'm': the first 5 requests were refused: HTTP 401 from POST {ep.url}/chat/completions "
                               "(Incorrect API key provided): check auth_token"), lines[0]
    assert "--resume t" in lines[0]
    records = ws.records("qs", "m")
    assert len(records) == COUNT and all(r["error"] for r in records)   # one record per sample, each with its reason
    assert {r["error"].split(":")[0] for r in records} == {"HTTP 401", "endpoint refused"}
    assert final(ws)["scores"][0]["num_failed"] == COUNT


def test_a_url_missing_v1_is_refused_with_404_naming_the_path_it_posted_to(ws, capsys):
    ws.text_questions(COUNT)
    with ScriptedEndpoint(answer_by_number) as ep:
        base = ep.url.removesuffix("/v1")
        ws.config([model(base, batch_size=2)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
        sent = len(ep.requests)
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and sent == 0   # the scripted server never saw them: only its /v1 routes exist
    assert f"HTTP 404 from POST {base}/chat/completions (404: Not Found): the url probably misses /v1" in lines[0], lines
    assert len(ws.records("qs", "m")) == COUNT


def test_a_wrong_model_id_is_refused_with_404_saying_the_model_id(ws, capsys):
    ws.text_questions(COUNT)
    missing = lambda seen, n: Reply(status=404, payload={"error": {"message": f"The model `{seen.body['model']}` does not exist."}})
    with ScriptedEndpoint(missing) as ep:
        ws.config([model(ep.url, batch_size=8)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
        sent = len(ep.requests)
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and sent <= 16
    assert "the model id 'scripted-m' is probably not served there" in lines[0] and f"POST {ep.url}/chat/completions" in lines[0]


def test_the_same_400_for_every_first_request_stops_the_pass_naming_the_message(ws, capsys):
    """o1 refusing max_tokens, a text-only model sent audio: every request gets the same 400."""
    ws.text_questions(COUNT)
    unsupported = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    with ScriptedEndpoint(lambda seen, n: Reply(status=400, payload={"error": {"message": unsupported}})) as ep:
        ws.config([model(ep.url, batch_size=4)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
        sent = len(ep.requests)
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and sent <= 8, sent
    assert "HTTP 400" in lines[0] and "Unsupported parameter" in lines[0] and "refuses every request the same way" in lines[0]
    assert len(ws.records("qs", "m")) == COUNT


@pytest.mark.parametrize("message", [
    lambda n: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
    lambda n: f"This model's maximum context length is 4096 tokens, but you requested {5000 + n} tokens.",
], ids=["content filter", "messages that differ"])
def test_400s_that_are_about_their_prompts_do_not_stop_the_pass(ws, message):
    """Azure's content filter answers a prompt with 400; a red-teaming set may trip it on its first samples."""
    ws.text_questions(COUNT)
    with ScriptedEndpoint(lambda seen, n: Reply(status=400, payload={"error": {"message": message(n)}})) as ep:
        ws.config([model(ep.url, batch_size=4)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
        sent = len(ep.requests)
    assert code == 3 and sent == COUNT


def test_an_all_5xx_server_is_taken_out_after_a_few_samples_instead_of_retrying_every_one(ws, capsys):
    """retry_attempts 2: sending every sample its 3 attempts would be 3 x 40 requests."""
    ws.text_questions(COUNT)
    broken = lambda seen, n: Reply(status=500, payload={"error": {"message": "CUDA error"}}, headers={"Retry-After": "0"})
    with ScriptedEndpoint(broken) as ep:
        ws.config([model(ep.url, batch_size=2, retry_attempts=2)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
        sent = len(ep.requests)
    err = capsys.readouterr().err
    # Taken out after 8 samples in a row exhausted their retries; the other workers' samples (batch_size + 4
    # of them) may each be mid-retry then: at most (8 + 6) x 3 requests, whatever the dataset's size.
    assert code == 3 and sent <= (8 + 6) * 3, sent
    assert "endpoint of model 'm' is down: HTTP 500: CUDA error" in err
    records = ws.records("qs", "m")
    assert len(records) == COUNT and {r["error"].split(" (")[0].split(":")[0] for r in records} == {"HTTP 500", "endpoint down"}


@pytest.mark.parametrize("status,body,fix", [
    (405, b"<html><h1>405 Not Allowed</h1></html>", "the url does not point at an OpenAI-compatible API"),
    (407, b"Proxy Authentication Required", "a proxy in front of the server asks for its own credentials"),
    (410, b'{"error": {"message": "The model has been deprecated"}}', "the model id 'scripted-m' is no longer served there"),
])
def test_an_endpoint_refusing_every_request_with_405_407_or_410_is_stopped_like_a_wrong_key(ws, capsys, status, body, fix):
    """A url that is a web page (nginx answers POST with 405), a gateway wanting its own credentials, a retired
    model: no retry changes them, and each used to be sent every sample of the dataset."""
    ws.text_questions(COUNT)
    with ScriptedEndpoint(lambda seen, n: Reply(status=status, raw=body)) as ep:
        ws.config([model(ep.url, batch_size=4)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
        sent = len(ep.requests)
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and sent <= 2 * 4, sent
    assert f"the first 5 requests were refused: HTTP {status} from POST {ep.url}/chat/completions" in lines[0] and fix in lines[0], lines
    assert len(ws.records("qs", "m")) == COUNT


def test_a_gateway_answering_every_request_with_an_error_object_in_a_200_is_taken_out(ws, capsys):
    """`{"error": {...}}` with status 200 is a gateway reporting its own failure, not a model's answer to one
    prompt: like a 5xx it takes the endpoint out instead of being retried on every sample."""
    ws.text_questions(COUNT)
    failing = lambda seen, n: Reply(status=200, payload={"error": {"message": "upstream connect error", "code": 503}})
    with ScriptedEndpoint(failing) as ep:
        ws.config([model(ep.url, batch_size=2, retry_attempts=2)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
        sent = len(ep.requests)
    assert code == 3 and sent <= (8 + 6) * 3, sent
    assert "endpoint of model 'm' is down: bad reply: reply holds an error instead of choices: upstream connect error" in capsys.readouterr().err
    assert len(ws.records("qs", "m")) == COUNT


def test_a_few_refusals_among_answers_do_not_stop_the_endpoint(ws):
    """Once the server has answered, a 422 for a few samples whose requests it cannot take is about those samples
    (three of them in a row included)."""
    ws.text_questions(COUNT)
    odd = lambda seen, n: Reply(status=422, payload={"error": {"message": "too long"}}) if seen.text.endswith(("1", "2", "3")) else answer_by_number(seen, n)
    with ScriptedEndpoint(odd) as ep:
        ws.config([model(ep.url, batch_size=4)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
    records = ws.records("qs", "m")
    failed = sorted(r["id"] for r in records if r["error"])
    assert code == 3 and all(r["error"] == "HTTP 422: too long" for r in records if r["error"])
    assert len(failed) == sum(1 for i in range(COUNT) if str(i).endswith(("1", "2", "3")))


@pytest.mark.parametrize("broken", ["500", "malformed"])
def test_a_broken_but_answering_replica_is_taken_out_and_its_work_moves_to_the_others(ws, capsys, broken):
    ws.text_questions(COUNT)
    reply = Reply(status=500, payload={"error": {"message": "boom"}}) if broken == "500" else Reply(raw=b"<html>502 Bad Gateway</html>")
    with ScriptedEndpoint(answer_by_number, latency=0.1) as good, ScriptedEndpoint(lambda seen, n: reply) as bad:
        ws.config([model([good.url, bad.url], batch_size=2, retry_attempts=1)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
        sent_to_bad = len(bad.requests)
    err = capsys.readouterr().err
    assert code == 0, err
    assert final(ws)["scores"][0]["num_failed"] == 0 and final(ws)["scores"][0]["score"] == 100.0
    assert f"endpoint of model 'm ({bad.url})' is down" in err
    assert sent_to_bad <= (8 + 6) * 2, sent_to_bad   # taken out, not sent its share of the dataset


def test_a_replica_refusing_its_key_leaves_its_work_to_the_others_with_a_warning(ws, capsys):
    ws.text_questions(COUNT)
    refuse = lambda seen, n: Reply(status=403, payload={"error": {"message": "forbidden"}})
    with ScriptedEndpoint(answer_by_number) as good, ScriptedEndpoint(refuse) as bad:
        ws.config([model(good.url, batch_size=2), model(bad.url, batch_size=2)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = cli(ws)
        sent_to_bad = len(bad.requests)
    err = capsys.readouterr().err
    assert code == 0 and final(ws)["scores"][0]["num_failed"] == 0
    assert sent_to_bad <= 4 and f"warning: model 'm ({bad.url})': the first 3 requests were refused: HTTP 403" in err, err


def test_max_failure_rate_stops_a_failing_run_and_leaves_the_rest_for_a_resume(ws, capsys):
    ws.text_questions(COUNT)
    # Each 400 about its own prompt (the same 400 for all would stop the endpoint before max_failure_rate does).
    failing = lambda seen, n: Reply(status=400, payload={"error": {"message": f"bad request: prompt {n} is too long"}})
    with ScriptedEndpoint(failing) as ep:
        ws.config([model(ep.url, batch_size=2)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"), max_failure_rate=0.5)
        code = cli(ws)
        sent = len(ep.requests)
    lines = error_lines(capsys.readouterr().err)
    assert code == 3 and 20 <= sent < COUNT, sent
    assert len(lines) == 1 and lines[0].startswith("error: stopped after 20 samples: 20 failed (100%), more than max_failure_rate 0.5 allows")
    assert "--resume t" in lines[0]
    data = final(ws)
    assert data["interrupted"] and data["stopped"].startswith("stopped after 20 samples")
    assert data["scores"][0]["num_samples"] == COUNT   # the samples never asked are counted, not dropped
    assert len(ws.records("qs", "m")) == sent          # only what was asked is written: a resume asks the rest
    assert "the run stopped after 20 samples: 20 failed (100%)" in (ws.root / "runs" / "t" / "report.html").read_text()


def test_max_failure_rate_waits_for_twenty_samples_so_one_early_failure_does_not_stop_the_run(ws):
    ws.text_questions(COUNT)
    first_fails = lambda seen, n: Reply(status=400, payload={"error": {"message": "bad"}}) if n == 0 else answer_by_number(seen, n)
    with ScriptedEndpoint(first_fails) as ep:
        ws.config([model(ep.url, batch_size=1)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"), max_failure_rate=0.1)
        code = cli(ws)
        sent = len(ep.requests)
    assert code == 3 and sent == COUNT and not final(ws)["stopped"] and final(ws)["scores"][0]["num_failed"] == 1


def test_a_judge_refusing_its_key_is_stopped_early_and_named(ws, capsys):
    ws.text_questions(COUNT)
    refuse = lambda seen, n: Reply(status=401, payload={"error": {"message": "invalid judge key"}})
    with ScriptedEndpoint(answer_by_number) as ep, ScriptedEndpoint(refuse) as judge:
        ws.config([model(ep.url)], [["qs", "llm_judge_binary"]], output_dir=str(ws.root / "runs"),
                  judge_properties={"judge_model": "j", "judge_api_endpoint": judge.url, "judge_concurrency": 4})
        code = cli(ws)
        judged = len(judge.requests)
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and judged <= 2 * 4, judged
    assert len(lines) == 1 and lines[0].startswith(f"error: judge:j: the first 5 requests were refused: HTTP 401 from POST {judge.url}/chat/completions")
    assert final(ws)["scores"][0]["details"]["num_judge_failed"] == COUNT
