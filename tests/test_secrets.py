"""Secrets never leave the process: not through a redirect, not half-masked in a server's message, not in
a URL's user info, not under any credential-like field name, not cut in two by a truncation."""

import base64
import json
import subprocess
import sys

import pytest

from lalmeval.config.secrets import REDACTED, Redactor, clip, is_credential
from tests.support.endpoint import AnyPathEndpoint, Reply, ScriptedEndpoint, answer_by_number
from tests.support.workspace import REPO, model

KEY = "sk-proj-abQ7Rm2ZpLx9Vt4KcW8nHy3JdF6GsB1uwxyz"


def runs_of(secret: str) -> list[str]:
    """Every run of 6 or more characters of the secret's start or end."""
    return [secret[:k] for k in range(6, len(secret) + 1)] + [secret[-k:] for k in range(6, len(secret) + 1)]


def shown_runs(text: str, secret: str) -> list[str]:
    return [run for run in runs_of(secret) if run in text]


def openai_401(key: str) -> str:
    """OpenAI's own message for a wrong key: the first 10 and last 4 characters, the rest masked."""
    return (f"Incorrect API key provided: {key[:10]}{'*' * 20}{key[-4:]}. "
            "You can find your API key at https://platform.openai.com/account/api-keys.")


# --- The redactor on its own ----------------------------------------------------------------------


def test_a_masked_echo_shows_no_six_characters_of_the_keys_start_or_end():
    text = Redactor([KEY])(openai_401(KEY))
    assert not shown_runs(text, KEY), text
    assert text.startswith(f"Incorrect API key provided: {REDACTED}*") and "api-keys" in text


@pytest.mark.parametrize("cut", [6, 9, 21, len(KEY) - 6, len(KEY) - 1])
def test_a_key_cut_anywhere_shows_neither_half(cut):
    redact = Redactor([KEY])
    for piece in (KEY[:cut], KEY[cut:]):
        text = redact(f"error near '{piece}' in the header")
        assert not shown_runs(text, KEY), text
    assert not shown_runs(clip("x" * 280 + KEY, redact, 300), KEY)


def test_runs_shorter_than_six_characters_and_ordinary_text_are_left_alone():
    redact = Redactor([KEY])
    assert redact("sk-pr and wxyz are fine, so is this sentence") == "sk-pr and wxyz are fine, so is this sentence"
    assert redact(f"a{KEY}b{KEY[::-1]}") == f"a{REDACTED}b{KEY[::-1]}"


@pytest.mark.parametrize("url, shown", [
    ("http://user:pass@host:8000/v1", f"http://user:{REDACTED}@host:8000/v1"),
    ("see https://bob:p%40ss:w0rd@gw.example/v1?x=1 now", f"see https://bob:{REDACTED}@gw.example/v1?x=1 now"),
    ("http://host:8000/v1 and http://token@host/v1", "http://host:8000/v1 and http://token@host/v1"),
])
def test_the_password_of_a_url_is_hidden_whatever_its_length(url, shown):
    assert Redactor()(url) == shown


@pytest.mark.parametrize("name", ["api_key", "x-api-key", "X-Api-Key", "private_key", "privateKey", "passphrase", "pwd", "password",
                                  "client_secret", "authorization", "Authorization", "bearer", "cookie", "session", "session_id",
                                  "signature", "credentials", "access_token", "hf_token", "authToken", "auth", "jwt", "key", "oauth_token",
                                  "pass", "Ocp-Apim-Subscription-Key", "subscription_key", "license_key", "ssh_key", "app_key", "masterKey"])
def test_credential_like_names_are_credentials(name):
    assert is_credential(name)


@pytest.mark.parametrize("name", ["max_tokens", "skip_special_tokens", "author", "keywords", "cache_key", "top_k", "temperature",
                                  "chat_template_kwargs", "response_format", "min_p"])
def test_ordinary_settings_are_not_credentials(name):
    assert not is_credential(name)


# --- Through a real run ---------------------------------------------------------------------------


def run_cli(ws, run_id, env_key=KEY):
    env = {"LALM_TOKEN": env_key, "PATH": "/usr/bin:/bin", "HOME": str(ws.root)}
    return subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(ws.root / "config.yaml"), "--run-id", run_id],
                          cwd=REPO, capture_output=True, text=True, timeout=180, env=env)


def everything(ws, out) -> dict[str, str]:
    """Every file the run wrote (the config it was given aside) and its console output."""
    texts = {str(p.relative_to(ws.root)): p.read_bytes().decode(errors="ignore") for p in ws.root.rglob("*")
             if p.is_file() and p != ws.root / "config.yaml"}
    return {**texts, "stdout": out.stdout, "stderr": out.stderr}


def assert_no_runs_anywhere(ws, out, secret):
    leaks = {where: shown_runs(text, secret)[:3] for where, text in everything(ws, out).items() if shown_runs(text, secret)}
    assert not leaks, leaks


def test_openais_masked_key_echo_reaches_no_record_report_or_console(ws):
    ws.text_questions(3)
    with ScriptedEndpoint(lambda seen, n: Reply(status=401, payload={"error": {"message": openai_401(KEY), "code": "invalid_api_key"}})) as ep:
        ws.config([model(ep.url, auth_token="${LALM_TOKEN}")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "s")
        assert ep.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    assert out.returncode == 3, out.stderr
    records = ws.records("qs", "m", "s")
    assert all(r["error"].startswith(f"HTTP 401: Incorrect API key provided: {REDACTED}*") for r in records), records
    assert_no_runs_anywhere(ws, out, KEY)


def test_a_password_in_the_endpoint_url_is_written_nowhere(ws):
    """`http://user:password@host` (sent as Basic auth by the client) in config.yaml, records, the progress
    lines, `endpoints_down` and the messages: the password is never written, short or long."""
    ws.text_questions(6)
    with AnyPathEndpoint(answer_by_number) as ep:
        alive = f"http://bob:pw1@127.0.0.1:{ep.port}/v1"
        dead = "http://bob:s3cr3t-pass@127.0.0.1:9/v1"
        ws.config([model([alive, dead], retry_attempts=0, batch_size=1)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "s")
        assert ep.requests[0].headers["Authorization"].startswith("Basic ")
    assert "bob:<redacted>@127.0.0.1:9" in out.stderr
    for where, text in everything(ws, out).items():
        assert ":pw1@" not in text and "s3cr3t" not in text and "-pass" not in text, where
    stored = (ws.root / "runs" / "s" / "config.yaml").read_text()
    assert f"http://bob:{REDACTED}@127.0.0.1:{ep.port}/v1" in stored


@pytest.mark.parametrize("field", ["private_key", "passphrase", "pwd", "client_secret", "x-api-key", "cookie", "session", "signature"])
def test_a_credential_like_extra_body_field_is_a_secret(ws, field):
    """Short values too: blanked in the recorded parameters; long ones scrubbed from every other text."""
    ws.text_questions(2)
    echo = lambda seen, n: f"your {field} is {seen.body[field]}"
    with ScriptedEndpoint(echo) as ep:
        ws.config([model(ep.url, generation_kwargs={"extra_body": {field: "${LALM_TOKEN}"}})], [["qs", "accuracy"]],
                  output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "s")
        assert ep.requests[0].body[field] == KEY
    records = ws.records("qs", "m", "s")
    assert all(r["params"]["extra_body"][field] == REDACTED and r["prediction"] == f"your {field} is {REDACTED}" for r in records)
    assert_no_runs_anywhere(ws, out, KEY)


@pytest.mark.parametrize("value", [[KEY, "sk-other-0123456789"], 98765432123, {"id": "me", "value": KEY}])
def test_a_credential_field_holding_a_list_a_number_or_an_object_is_a_secret(ws, value):
    """`api_keys: [...]`, an unquoted numeric password (YAML reads a number) or `auth: {...}`: blanked in the
    recorded parameters and the stored config, and scrubbed from every other text."""
    ws.text_questions(1)
    secrets = [str(v) for v in (value if isinstance(value, list) else value.values() if isinstance(value, dict) else [value])]
    with ScriptedEndpoint(lambda seen, n: f"you sent {seen.body['credential']}") as ep:
        ws.config([model(ep.url, generation_kwargs={"extra_body": {"credential": value}})], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "s")
        assert ep.requests[0].body["credential"] == value
    record = ws.records("qs", "m", "s")[0]
    assert record["params"]["extra_body"]["credential"] == REDACTED
    for secret in secrets:
        if len(secret) >= 6:
            assert_no_runs_anywhere(ws, out, secret)
    assert "98765432123" not in (ws.root / "runs" / "s" / "config.yaml").read_text()


def test_a_key_in_the_urls_query_and_a_token_as_its_user_name_are_written_nowhere(ws):
    """`https://gw/v1?api-key=…` (gateways that take the key in the query) and `http://TOKEN@host/v1` (sent as
    Basic auth): neither is written to the stored config, records, progress lines or the report."""
    ws.text_questions(2)
    with AnyPathEndpoint(answer_by_number) as ep:
        urls = [f"http://127.0.0.1:{ep.port}/v1?tenant=lab&api-key={KEY}", f"http://tok-{KEY[8:]}@127.0.0.1:{ep.port}/v1"]
        ws.config([model(urls[0], name="query"), model(urls[1], name="user")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "s")
        assert {r.query.get("api-key") for r in ep.requests} == {KEY, None}
    assert out.returncode == 0, out.stderr
    assert_no_runs_anywhere(ws, out, KEY)
    assert_no_runs_anywhere(ws, out, f"tok-{KEY[8:]}")
    stored = (ws.root / "runs" / "s" / "config.yaml").read_text()
    assert f"api-key={REDACTED}" in stored and "tenant=lab" in stored


def test_basic_credentials_a_server_echoes_in_base64_are_hidden(ws):
    """A URL's `user:password@` is sent as `Authorization: Basic base64(user:password)`; a proxy that echoes
    the header in its error message gives the password away unless that spelling is a secret too."""
    ws.text_questions(2)
    password = "Tr0ub4dor-and-3-horses"
    echo = lambda seen, n: Reply(status=401, payload={"error": {"message": f"bad credentials: {seen.headers['Authorization']}"}})
    with AnyPathEndpoint(echo) as ep:
        ws.config([model(f"http://alice:{password}@127.0.0.1:{ep.port}/v1")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "s")
    basic = base64.b64encode(f"alice:{password}".encode()).decode()
    assert ws.records("qs", "m", "s")[0]["error"] == f"HTTP 401: bad credentials: Basic {REDACTED}"
    assert_no_runs_anywhere(ws, out, basic)
    assert_no_runs_anywhere(ws, out, password)


# --- Redirects --------------------------------------------------------------------------------------


def redirecting(location):
    return lambda seen, n: Reply(status=307, headers={"Location": location}, payload={})


@pytest.mark.parametrize("status", [301, 307, 308])
@pytest.mark.parametrize("azure", [False, True])
def test_a_redirect_to_another_host_is_not_followed_and_fails_naming_that_host(ws, status, azure):
    """The key (Bearer or Azure's api-key header) never reaches the other host, and its answer is never scored."""
    ws.text_questions(2)
    with ScriptedEndpoint(lambda seen, n: "answer 0") as other:
        away = f"http://localhost:{other.port}/v1/chat/completions"
        with ScriptedEndpoint(lambda seen, n: Reply(status=status, headers={"Location": away}, payload={})) as ep:
            settings = {"api_version": "2024-06-01"} if azure else {}
            ws.config([model(ep.url, auth_token="${LALM_TOKEN}", **settings)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
            out = run_cli(ws, "s")
            assert len(ep.requests) == 2 and ep.requests[0].headers[("api-key" if azure else "Authorization")]
        assert other.requests == []
    assert out.returncode == 3, out.stderr
    records = ws.records("qs", "m", "s")
    assert all(r["prediction"] is None for r in records)
    assert all(r["error"] == f"HTTP {status}: redirected to another host, localhost:{other.port}: not followed "
                             f"(credentials are never sent to another host); set url to the endpoint itself" for r in records)


def test_a_redirect_to_another_port_of_the_same_address_is_another_host(ws):
    ws.text_questions(1)
    with ScriptedEndpoint(answer_by_number) as other:
        with ScriptedEndpoint(redirecting(f"{other.url}/chat/completions")) as ep:
            ws.config([model(ep.url, auth_token="${LALM_TOKEN}")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
            run_cli(ws, "s")
        assert other.requests == []
    assert f"redirected to another host, 127.0.0.1:{other.port}" in ws.records("qs", "m", "s")[0]["error"]


def test_a_redirect_on_the_same_host_is_followed_with_its_credentials(ws):
    ws.text_questions(3)

    def moved(seen, n):
        if seen.path.startswith("/old/"):
            return Reply(status=308, headers={"Location": seen.path.replace("/old/", "/new/", 1)}, payload={})
        return answer_by_number(seen, n)

    with AnyPathEndpoint(moved) as ep:
        ws.config([model(f"http://127.0.0.1:{ep.port}/old/v1", auth_token="${LALM_TOKEN}")], [["qs", "accuracy"]],
                  output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "s")
        followed = [r for r in ep.requests if r.path.startswith("/new/")]
        assert len(followed) == 3 and all(r.headers["Authorization"] == f"Bearer {KEY}" for r in followed)
    assert out.returncode == 0, out.stderr
    assert json.loads((ws.root / "runs" / "s" / "final_scores.json").read_text())["scores"][0]["score"] == 100.0


def test_a_key_cut_by_the_error_body_limit_is_still_hidden(ws):
    """The client reads at most 64 KB of an error body: a key that straddles the limit is cut in two
    before anything else sees it, and the first half used to be written as is."""
    ws.text_questions(1)
    body = (" " * (64 * 1024 - 20) + KEY + " is not valid").encode()
    with ScriptedEndpoint(lambda seen, n: Reply(status=400, raw=body)) as ep:
        ws.config([model(ep.url, auth_token="${LALM_TOKEN}")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "s")
    assert ws.records("qs", "m", "s")[0]["error"] == f"HTTP 400: {REDACTED}"
    assert_no_runs_anywhere(ws, out, KEY)


def test_a_launched_servers_log_hides_masked_keys_and_url_passwords(ws):
    ws.text_questions(1)
    launch = f"echo '{openai_401(KEY)}'; echo 'proxy http://svc:hunter2@10.0.0.1:3128 ready'; sleep 30"
    ws.config([model("http://127.0.0.1:9/v1", auth_token="${LALM_TOKEN}", launch=launch, launch_timeout=1)], [["qs", "accuracy"]],
              output_dir=str(ws.root / "runs"))
    out = run_cli(ws, "L")
    assert out.returncode == 2
    log = (ws.root / "runs" / "L" / "launch_m.log").read_text()
    assert f"Incorrect API key provided: {REDACTED}*" in log and f"http://svc:{REDACTED}@10.0.0.1:3128 ready" in log
    assert "hunter2" not in log
    assert_no_runs_anywhere(ws, out, KEY)


def echoed_spellings(key: str) -> dict[str, str]:
    """How a careless endpoint or server may echo a token: base64 (standard, URL-safe, with or without `Bearer `), case-changed."""
    raw, bearer = key.encode(), f"Bearer {key}".encode()
    return {"b64": base64.b64encode(raw).decode(), "b64url": base64.urlsafe_b64encode(raw).decode(),
            "b64 bearer": base64.b64encode(bearer).decode(), "b64url bearer": base64.urlsafe_b64encode(bearer).decode().rstrip("="),
            "b64 inside": base64.b64encode(b"auth=" + bearer + b";").decode(), "upper": key.upper(), "lower": key.lower()}


# A key whose base64 differs between the standard and URL-safe alphabets, and that changes under upper() and lower().
ODD_KEY = "sk-Zz~~>>??Qq-77mixedCASE-0x9f"


@pytest.mark.parametrize("spelling", list(echoed_spellings(ODD_KEY)))
def test_a_token_echoed_in_base64_or_another_case_reaches_no_record_report_or_console(ws, spelling):
    ws.text_questions(2)
    shown = echoed_spellings(ODD_KEY)[spelling]
    with ScriptedEndpoint(lambda seen, n: f"you sent {shown} here") as ep:
        ws.config([model(ep.url, auth_token="${LALM_TOKEN}")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "s", env_key=ODD_KEY)
    assert out.returncode == 0, out.stderr
    assert all(REDACTED in r["prediction"] for r in ws.records("qs", "m", "s"))
    for where, text in everything(ws, out).items():
        assert shown not in text and shown[:12] not in text, where
    assert_no_runs_anywhere(ws, out, ODD_KEY)


def test_a_launched_servers_log_hides_a_base64_or_upper_cased_token(ws):
    ws.text_questions(1)
    spelled = echoed_spellings(ODD_KEY)
    launch = f"echo 'auth {spelled['b64 bearer']} {spelled['b64url']} {spelled['upper']}'; sleep 30"
    ws.config([model("http://127.0.0.1:9/v1", auth_token="${LALM_TOKEN}", launch=launch, launch_timeout=1)], [["qs", "accuracy"]],
              output_dir=str(ws.root / "runs"))
    out = run_cli(ws, "L", env_key=ODD_KEY)
    assert out.returncode == 2
    log = (ws.root / "runs" / "L" / "launch_m.log").read_text()
    assert log.count(REDACTED) >= 3 and not any(spelled[k] in log for k in ("b64 bearer", "b64url", "upper")), log


def test_ordinary_text_and_a_short_tokens_spellings_are_left_alone():
    redactor = Redactor([ODD_KEY])
    text = "the quick brown fox; SGVsbG8gd29ybGQ= is hello world"
    assert redactor(text) == text
    assert Redactor(["EMPTY"])("empty EMPTY ZW1wdHk=") == "empty EMPTY ZW1wdHk="
