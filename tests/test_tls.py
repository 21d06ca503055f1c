"""verify_ssl / judge_verify_ssl: https endpoints with a self-signed certificate, on 127.0.0.1."""

import shutil
import socket
import ssl
import subprocess
import sys

import pytest

from lalmeval.cli.commands import main
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model
from tests.test_judges import answering, binary_judge, dataset, go


@pytest.fixture
def server_tls(tmp_path):
    """A certificate for 127.0.0.1 signed by nobody a client trusts, and a server context holding it."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a self-signed certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, cert, key


def commands(ws, count=2):
    rows = ws.copy_demo_audio(demo_rows(count))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    return rows


def configure(ws, url, **settings):
    settings.setdefault("retry_attempts", 0)
    return ws.config([model(url, **settings)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"))


def test_self_signed_endpoint_fails_by_default_and_answers_with_verify_ssl_false(ws, server_tls):
    commands(ws)
    with ScriptedEndpoint(lambda seen, n: "ok", ssl_context=server_tls[0]) as ep:
        assert ep.url.startswith("https://127.0.0.1:")
        configure(ws, ep.url, retry_attempts=3)
        assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "strict"]) == 3
        assert ep.requests == []  # the handshake failed: nothing reached the server
        errors = [r["error"] for r in ws.records("cmds", "m", "strict")]
        assert len(errors) == 2 and all("certificate not trusted (verify_ssl: false accepts a self-signed one)" in e and "certificate verify failed" in e for e in errors), errors
        assert {r["attempts"] for r in ws.records("cmds", "m", "strict")} == {1}  # not retried: retrying cannot help

        configure(ws, ep.url, verify_ssl=False)
        assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "lenient"]) == 0
        assert len(ep.requests) == 2
    assert [r["error"] for r in ws.records("cmds", "m", "lenient")] == [None, None]


def test_judge_verify_ssl_false_reaches_a_self_signed_judge(ws, server_tls):
    rows = dataset(ws)
    with ScriptedEndpoint(answering(rows)) as model_ep, ScriptedEndpoint(binary_judge, ssl_context=server_tls[0]) as judge_ep:
        strict = go(ws, model_ep, judge_ep, "llm_judge_binary", run_id="strict", judge_extra={"judge_retry_attempts": 0})
        assert judge_ep.requests == [] and strict.scores[0].details["num_judge_failed"] == len(rows)
        lenient = go(ws, model_ep, judge_ep, "llm_judge_binary", run_id="lenient",
                     judge_extra={"judge_retry_attempts": 0, "judge_verify_ssl": False})
    assert len(judge_ep.requests) == len(rows)
    assert lenient.scores[0].score == 100.0 and lenient.scores[0].details["num_judge_failed"] == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


HTTPS_SERVER = """
import http.server, json, ssl, sys

class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self, payload):
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.answer({"object": "list", "data": [{"id": "scripted"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.answer({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})

server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[2], sys.argv[3])
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


def test_a_launched_self_signed_server_is_seen_answering_with_verify_ssl_false(ws, server_tls, capsys):
    commands(ws, 1)
    _, cert, key = server_tls
    script = ws.root / "https_server.py"
    script.write_text(HTTPS_SERVER)
    port = free_port()
    launch = f"{sys.executable} {script} {port} {cert} {key}"
    url = f"https://127.0.0.1:{port}/v1"
    configure(ws, url, launch=launch, launch_timeout=5)
    assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "strict"]) == 2
    assert f"{url} did not answer within 5s" in capsys.readouterr().err
    configure(ws, url, launch=launch, launch_timeout=30, verify_ssl=False)
    assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "lenient"]) == 0
    assert [r["prediction"] for r in ws.records("cmds", "m", "lenient")] == ["ok"]


def test_the_wrong_scheme_either_way_fails_naming_the_scheme_to_write_and_the_fix_works(ws, server_tls):
    commands(ws)
    with ScriptedEndpoint(lambda seen, n: "ok", ssl_context=server_tls[0]) as tls, ScriptedEndpoint(lambda seen, n: "ok") as plain:
        for server, wrong, says in ((tls, tls.url.replace("https://", "http://"), "write https:// instead of http:// in url"),
                                    (plain, plain.url.replace("http://", "https://"), "write http:// instead of https:// in url")):
            run = wrong.split(":")[0]
            configure(ws, wrong, verify_ssl=False)
            assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", f"wrong-{run}"]) == 3
            errors = [r["error"] for r in ws.records("cmds", "m", f"wrong-{run}")]
            assert len(errors) == 2 and all(e.startswith("connection error") and says in e for e in errors), errors
            assert server.requests == []
            configure(ws, server.url, verify_ssl=False)   # the hint followed
            assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", f"right-{run}"]) == 0
            assert [r["error"] for r in ws.records("cmds", "m", f"right-{run}")] == [None, None]
