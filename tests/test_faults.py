"""Faulty endpoints: every sample ends as a prediction or a recorded failure with its reason."""

import asyncio
import json
import subprocess
import sys

import pytest
import yaml

from lalmeval.inference.limit import AdaptiveLimit
from tests.support.endpoint import AnyPathEndpoint, Reply, ScriptedEndpoint, answer_by_number, chat_payload
from tests.support.workspace import REPO, demo_rows, model

COUNT = 16


def setup(ws, count=COUNT):
    rows = ws.copy_demo_audio(demo_rows(count))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    return rows


def test_every_fault_ends_as_prediction_or_recorded_reason(ws):
    setup(ws)
    lengths = {}

    def faulty(seen, n):
        index = lengths.setdefault(seen.audio_seconds[0], len(lengths))
        kind = index % 8
        first_time = sum(1 for r in faults.requests if r.audio_seconds == seen.audio_seconds) == 1
        if kind == 0:
            return Reply(status=500, payload={"error": {"message": "internal"}}) if first_time else "recovered"
        if kind == 1:
            return Reply(status=429, payload={}, headers={"Retry-After": "0"}) if first_time else "after 429"
        if kind == 2:
            return Reply(payload=chat_payload("too late"), delay=5)          # hangs past the timeout, always
        if kind == 3:
            return Reply(drop=True)                                          # connection dropped, always
        if kind == 4:
            return Reply(raw=b'{"choices": [ broken')                        # malformed JSON, always
        if kind == 5:
            return Reply(payload={"choices": []})                            # empty choices
        if kind == 6:
            payload = chat_payload(None)
            payload["choices"][0]["message"]["reasoning_content"] = "answer from reasoning"
            return Reply(payload=payload)                                    # null content, reasoning fallback
        return Reply(payload=chat_payload(None))                             # null content, nothing else

    with ScriptedEndpoint(faulty) as faults:
        ws.config([model(faults.url, timeout=0.5, retry_attempts=1, batch_size=4)], [["cmds", "word_error_rate"]])
        result = ws.run()
    records = {r["id"]: r for r in ws.records("cmds", "m")}
    assert len(records) == COUNT
    by_kind = {}
    for record in records.values():
        by_kind.setdefault(record["error"] or record["prediction"], 0)
        by_kind[record["error"] or record["prediction"]] += 1
    assert by_kind["recovered"] == 2 and by_kind["after 429"] == 2 and by_kind["answer from reasoning"] == 2
    errors = sorted(r["error"] for r in records.values() if r["error"])
    assert sum(e == "timeout after 0.5s" for e in errors) == 2
    assert sum(e.startswith("connection error") for e in errors) == 2
    assert sum(e.startswith("malformed JSON reply") for e in errors) == 2
    assert sum(e == "bad reply: reply has empty 'choices'" for e in errors) == 2
    assert sum(e == "bad reply: reply content is null" for e in errors) == 2
    score = result.scores[0]
    assert score.num_samples == COUNT and score.num_failed == 10
    assert sum(score.details["failures"].values()) == 10
    assert all(r["attempts"] >= 1 for r in records.values() if r["error"] and "reply" not in r["error"])


def test_adaptive_limit_halves_on_overload_and_grows_back():
    async def scenario():
        limit = AdaptiveLimit(8, cooldown=0)
        limit.overloaded()
        limit.overloaded()
        assert limit.limit == 2
        for _ in range(2 + 3):
            limit.succeeded()
        assert limit.limit == 4
        for _ in range(100):
            limit.succeeded()
        assert limit.limit == 8
        # waiters beyond the limit wait; releasing wakes exactly one
        limit.limit = 1
        await limit.__aenter__()
        waiter = asyncio.ensure_future(limit.__aenter__())
        await asyncio.sleep(0)
        assert not waiter.done()
        await limit.__aexit__()
        await asyncio.sleep(0)
        assert waiter.done() and limit.in_flight == 1

    asyncio.run(scenario())


def test_sustained_429s_shrink_requests_in_flight(ws):
    setup(ws, count=40)

    def overloaded_then_fine(seen, n):
        if n < 24:
            return Reply(status=429, payload={}, headers={"Retry-After": "0.2"}, delay=0.05)
        return Reply(payload=chat_payload("ok"), delay=0.1)

    with ScriptedEndpoint(overloaded_then_fine) as ep:
        ws.config([model(ep.url, batch_size=8, retry_attempts=6)], [["cmds", "word_error_rate"]])
        result = ws.run()
    assert result.scores[0].num_failed == 0
    assert max(r.concurrent for r in ep.requests[:8]) == 8          # full batch_size at first
    assert max(r.concurrent for r in ep.requests[24:32]) <= 5       # halved by the 429s, growing back by one
    assert max(r.concurrent for r in ep.requests[-8:]) > 5          # and recovering


def cli_run(config, *extra, timeout=120):
    return subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), *extra], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_endpoint_that_stays_down_fails_its_samples_fast_and_the_rest_completes(ws):
    setup(ws, count=12)
    with ScriptedEndpoint(lambda s, n: "ok") as good:
        config = ws.config([model(good.url, "alive"), model("http://127.0.0.1:9/v1", "dead", retry_attempts=2, batch_size=2)],
                           [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"))
        out = cli_run(config, "--run-id", "down")
    assert out.returncode == 3, out.stderr
    assert "endpoint of model 'dead' is down" in out.stderr and "127.0.0.1:9" in out.stderr
    assert "--resume down" in out.stderr
    final = json.loads((ws.root / "runs" / "down" / "final_scores.json").read_text())
    scores = {s["model"]: s for s in final["scores"]}
    assert scores["alive"]["num_failed"] == 0 and scores["dead"]["num_failed"] == 12
    kinds = {f["kind"] for f in final["failures"] if f["model"] == "dead"}
    assert kinds <= {"connection error", "endpoint down"} and "endpoint down" in kinds
    assert "dead" in final["endpoints_down"]
    assert "Failed samples:" in out.stdout


def test_no_secret_reaches_any_file_or_output(ws):
    setup(ws, count=4)
    secret = "fake-token-TESTSECRET0123456789"
    echo = lambda seen, n: Reply(status=401, payload={"error": {"message": f"invalid key {secret}"}}) if n == 0 else "fine"
    with ScriptedEndpoint(echo) as ep:
        config = ws.config([model(ep.url, auth_token="${LALM_TEST_KEY}", batch_size=1)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"))
        env = {"LALM_TEST_KEY": secret, "PATH": "/usr/bin:/bin", "HOME": str(ws.root)}
        out = subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "s"], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
        assert ep.requests[0].headers["Authorization"] == f"Bearer {secret}"
    assert out.returncode == 3
    assert secret not in out.stdout + out.stderr
    written = [p for p in ws.root.rglob("*") if p.is_file()]
    assert any(p.name == "final_scores.json" for p in written)
    for path in written:
        assert secret not in path.read_bytes().decode(errors="ignore"), path
    records = (ws.root / "runs" / "s" / "records" / "cmds__m.jsonl").read_text()
    assert "invalid key <redacted>" in records
    assert yaml.safe_load((ws.root / "runs" / "s" / "config.yaml").read_text())["models"][0]["auth_token"] == "<redacted>"


TOKEN = 'tok-"quoted"\\back-SECRET-0123456789'
JUDGE_KEY = "judge-key-SECRET-9876543210"


def forms(secret):
    """Every spelling of a secret that could end up in a file or on the console."""
    return {secret, json.dumps(secret)[1:-1], repr(secret)[1:-1], secret[:20], json.dumps(secret)[1:21]}


def test_a_server_echoing_the_token_in_any_form_leaves_it_in_no_file_and_not_on_the_console(ws):
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": "fine"} for i in range(7)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})

    def echo(seen, n):
        if seen.body["model"] == "judge":
            return f"The key is {JUDGE_KEY}. Rating: 1"
        i = int(seen.text.split()[-1])
        return [
            lambda: f"fine, and your key is {TOKEN}",                                        # raw in a 200 reply
            lambda: f"key={TOKEN!r}",                                                        # as a repr
            lambda: Reply(status=500, payload={"error": {"message": "x" * 290 + TOKEN}}),    # at the 300-char cut
            lambda: Reply(status=400, payload={"error": {"message": f"bad key {json.dumps(TOKEN)}"}}),
            lambda: Reply(raw=b'{"oops": "' + TOKEN.encode() + b'"'),                        # malformed JSON
            lambda: Reply(status=401, payload={"error": {"message": f"invalid {JUDGE_KEY}"}}),
            lambda: "fine",
        ][i]()

    with ScriptedEndpoint(echo) as ep:
        judge = {"judge_model": "judge", "judge_api_endpoint": ep.url, "judge_api_key": "${LALM_JUDGE_KEY}"}
        config = ws.config([model(ep.url, auth_token="${LALM_TEST_KEY}", retry_attempts=0)], [["qs", "llm_judge_binary"]],
                           output_dir=str(ws.root / "runs"), judge_properties=judge, cache=True)
        env = {"LALM_TEST_KEY": TOKEN, "LALM_JUDGE_KEY": JUDGE_KEY, "PATH": "/usr/bin:/bin", "HOME": str(ws.root)}
        out = subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "s"],
                             cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
        assert any(r.headers.get("Authorization") == f"Bearer {TOKEN}" for r in ep.requests)
    assert out.returncode == 3, out.stderr
    secrets = forms(TOKEN) | forms(JUDGE_KEY)
    for secret in secrets:
        assert secret not in out.stdout + out.stderr, secret
    written = [p for p in ws.root.rglob("*") if p.is_file()]
    assert {p.name for p in written if p.parent.name == ".cache"} == {"m.jsonl", "judge_judge.jsonl"}
    for path in written:
        text = path.read_bytes().decode(errors="ignore")
        for secret in secrets:
            assert secret not in text, (path, secret)
    records = {r["id"]: r for r in ws.records("qs", "m", "s")}
    assert records["q0"]["prediction"] == "fine, and your key is <redacted>"
    assert records["q2"]["error"].endswith("<redacted>") or "<redacted>" in records["q2"]["error"]


# --- Nothing leaks, whatever the spelling or the place of the token ---------------------------


SLASHED_TOKEN = "sk-live/ABCdef+0123456789/xyz"


def run_with_token(ws, *args, token=SLASHED_TOKEN):
    """`lalmeval run` in a subprocess whose environment holds the token as LALM_TOKEN."""
    env = {"LALM_TOKEN": token, "PATH": "/usr/bin:/bin", "HOME": str(ws.root)}
    return subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(ws.root / "config.yaml"), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=180, env=env)


def assert_nowhere(ws, out, secret=SLASHED_TOKEN):
    texts = {p: p.read_bytes().decode(errors="ignore") for p in ws.root.rglob("*") if p.is_file()}
    where = [str(p.relative_to(ws.root)) for p, text in texts.items() if secret in text]
    where += ["stdout"] * (secret in out.stdout) + ["stderr"] * (secret in out.stderr)
    assert not where, f"the token is written in {where}"


ESCAPES = {
    "slashes": lambda token: token.replace("/", "\\/"),                         # PHP, Jackson, many gateways
    "unicode": lambda token: "".join(f"\\u{ord(ch):04x}" for ch in token),    # any character may be escaped
}


@pytest.mark.parametrize("escape", ESCAPES)
def test_nothing_leaks_a_token_echoed_with_json_escaped_slashes(ws, escape):
    """A 200 reply whose JSON spells the token with escapes (`\\/`, `\\u0073`): valid JSON, the same
    string. No list of raw spellings can cover every escape; the decoded text is redacted."""
    ws.text_questions(2)
    escaped = ESCAPES[escape](SLASHED_TOKEN)
    body = ('{"choices": [{"message": {"role": "assistant", "content": "your key is ' + escaped + '"}}]}').encode()
    with ScriptedEndpoint(lambda seen, n: Reply(raw=body)) as ep:
        ws.config([model(ep.url, auth_token="${LALM_TOKEN}")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_with_token(ws, "--run-id", "s")
        assert ep.requests[0].headers["Authorization"] == f"Bearer {SLASHED_TOKEN}"
    records = ws.records("qs", "m", "s")
    assert all(r["prediction"] == "your key is <redacted>" for r in records), [r["prediction"] for r in records]
    assert_nowhere(ws, out)


def test_nothing_leaks_a_token_that_is_part_of_the_endpoint_url(ws):
    """A gateway URL that carries the key (`http://host/gw/${LALM_TOKEN}/v1`, the same value as
    auth_token), served by two replicas, one of them down: the progress lines, the records'
    `extra.replica`, `endpoints_down` in final_scores.json and report.html all name the URL."""
    ws.text_questions(20)
    with AnyPathEndpoint(answer_by_number, latency=0.05) as ep:
        alive = f"http://127.0.0.1:{ep.port}/gw/${{LALM_TOKEN}}/v1"
        dead = "http://127.0.0.1:9/gw/${LALM_TOKEN}/v1"
        entry = model([alive, dead], auth_token="${LALM_TOKEN}", retry_attempts=0, batch_size=1)
        ws.config([entry], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_with_token(ws, "--run-id", "s")
        assert any(SLASHED_TOKEN in s.path for s in ep.requests)
    assert "<redacted>" in out.stderr  # the URL is still named, without its secret part
    final = json.loads((ws.root / "runs" / "s" / "final_scores.json").read_text())
    assert final["endpoints_down"], out.stderr
    assert_nowhere(ws, out)


@pytest.mark.parametrize("auth_token", ["${LALM_TOKEN}", None])
def test_nothing_leaks_a_token_passed_in_extra_body(ws, auth_token):
    """Some gateways take the key in the body: `generation_kwargs.extra_body: {api_key: ${LALM_TOKEN}}`,
    beside `auth_token: ${LALM_TOKEN}` or alone (a field named like a credential is a secret itself);
    records store `params` as sent, so they are redacted too."""
    ws.text_questions(2)
    with ScriptedEndpoint(answer_by_number) as ep:
        settings = {"auth_token": auth_token} if auth_token else {}
        entry = model(ep.url, generation_kwargs={"extra_body": {"api_key": "${LALM_TOKEN}"}}, **settings)
        ws.config([entry], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_with_token(ws, "--run-id", "s")
        assert ep.requests[0].body["api_key"] == SLASHED_TOKEN
    assert out.returncode == 0, out.stderr
    assert all(r["params"]["extra_body"]["api_key"] == "<redacted>" for r in ws.records("qs", "m", "s"))
    assert_nowhere(ws, out)


def test_nothing_leaks_a_token_that_a_prompt_rule_puts_in_the_prompt(ws):
    """A config that writes the key into the instruction (`prompt_rules: [{instruction: ...}]`): the
    request carries it, the record of every sample says <redacted>."""
    ws.text_questions(2)
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url, auth_token="${LALM_TOKEN}")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"),
                  prompt_rules=[{"model": "m", "instruction": "Your key is ${LALM_TOKEN}. Answer: "}])
        out = run_with_token(ws, "--run-id", "s")
        assert SLASHED_TOKEN in ep.requests[0].text
    assert out.returncode == 0, out.stderr
    assert all("Your key is <redacted>." in r["prompt"] for r in ws.records("qs", "m", "s"))
    assert_nowhere(ws, out)
