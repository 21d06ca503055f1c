"""`lalmeval serve`: the OpenAI surface, batching across connections, the bounded queue, and refusals
that are always OpenAI error objects — against the real server process and the official openai SDK."""

import base64
import json
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from tests.support.served import Served
from tests.support.workspace import DEMO, demo_rows

CLIP = (DEMO / demo_rows(1)[0]["audio"]).read_bytes()

GATED = '''
import pathlib, time
from lalmeval.serve import AudioModel

GATE = pathlib.Path(__file__).with_name("open")

class Gated(AudioModel):
    """Holds every batch until the test creates the file `open`; answers with the batch's size."""
    name = "gated"
    max_batch_size = 4

    def generate_batch(self, requests):
        while not GATE.exists():
            time.sleep(0.02)
        return [f"batch of {len(requests)}: {r.text}" for r in requests]

class Broken(AudioModel):
    name = "broken"

    def generate(self, request):
        if request.text == "crash":
            raise RuntimeError("a bug in the model")
        return "fine"
'''


@pytest.fixture
def models_folder(tmp_path):
    """A folder outside the repository holding the test's own model module (found from the current folder)."""
    (tmp_path / "gate_model.py").write_text(textwrap.dedent(GATED))
    return tmp_path


def ask(client, text: str, **settings) -> str:
    reply = client.chat.completions.create(model=settings.pop("model", "gated"), messages=[{"role": "user", "content": text}], **settings)
    return reply.choices[0].message.content


def wait_for(served: Served, **wanted: int) -> None:
    deadline = time.time() + 60
    while any(served.health()[key] != value for key, value in wanted.items()):
        assert time.time() < deadline, served.health()
        time.sleep(0.02)


def test_requests_waiting_on_a_busy_model_run_together_as_one_batch(models_folder):
    with Served("--model", "gate_model:Gated", cwd=models_folder) as served, ThreadPoolExecutor(4) as pool:
        first = pool.submit(ask, served.client, "a")
        wait_for(served, running=1)
        rest = [pool.submit(ask, served.client, text) for text in "bcd"]
        wait_for(served, waiting=3)
        (models_folder / "open").touch()
        assert first.result() == "batch of 1: a"
        assert [f.result() for f in rest] == ["batch of 3: b", "batch of 3: c", "batch of 3: d"]
        assert served.health()["batches"] == 2


def test_a_full_queue_answers_503_with_retry_after_and_the_admitted_requests_are_served(models_folder):
    with Served("--model", "gate_model:Gated", "--max-queue", "1", cwd=models_folder) as served, ThreadPoolExecutor(2) as pool:
        running = pool.submit(ask, served.client, "a")
        wait_for(served, running=1)
        waiting = pool.submit(ask, served.client, "b")
        wait_for(served, waiting=1)
        body = json.dumps({"model": "gated", "messages": [{"role": "user", "content": "c"}]}).encode()
        status, headers, answer = served.raw("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        assert status == 503 and int(headers["Retry-After"]) >= 1
        error = json.loads(answer)["error"]
        assert error["type"] == "server_error" and "server busy: 1 requests are waiting" in error["message"]
        (models_folder / "open").touch()
        assert (running.result(), waiting.result()) == ("batch of 1: a", "batch of 1: b")


def test_a_bug_in_the_model_is_a_500_error_object_and_the_server_goes_on(models_folder):
    with Served("--model", "gate_model:Broken", cwd=models_folder) as served:
        with pytest.raises(openai.InternalServerError) as caught:
            ask(served.client, "crash", model="broken")
        assert caught.value.status_code == 500 and caught.value.body["message"] == "internal error: RuntimeError: a bug in the model"
        assert ask(served.client, "hello", model="broken") == "fine"
    assert "RuntimeError: a bug in the model" in "".join(served.output)  # the traceback goes to the server's log only


@pytest.fixture(scope="module")
def echo():
    with Served("--model", "echo", "--max-body-mb", "1") as served:
        yield served


def multipart(fields: dict, file: bytes = None) -> tuple[bytes, dict]:
    boundary = uuid.uuid4().hex
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()]
    if file is not None:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.flac"\r\n\r\n'.encode() + file + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def chat_body(**fields) -> tuple[bytes, dict]:
    body = {"model": "echo-inputs", "messages": [{"role": "user", "content": "hi"}], **fields}
    return json.dumps(body).encode(), {"Content-Type": "application/json"}


REFUSALS = {
    "unknown route": ("GET", "/v1/nope", None, {}, 404, "no route GET /v1/nope"),
    "wrong method": ("DELETE", "/v1/models", None, {}, 405, "method DELETE is not allowed on /v1/models"),
    "unknown model id": ("GET", "/v1/models/gpt-9", None, {}, 404, "model 'gpt-9' does not exist here (served: echo-inputs)"),
    "chat to another model": ("POST", "/v1/chat/completions", *chat_body(model="gpt-9"), 404, "model 'gpt-9' does not exist here"),
    "JSON cut short": ("POST", "/v1/chat/completions", b'{"model": "echo-inputs", "messa', {"Content-Type": "application/json"}, 400, "request body is not valid JSON"),
    "n out of range": ("POST", "/v1/chat/completions", *chat_body(n=0), 400, "'n' must be an integer from 1 to 16"),
    "max_tokens not a number": ("POST", "/v1/chat/completions", *chat_body(max_tokens="ten"), 400, "'max_tokens' must be an integer"),
    "temperature out of range": ("POST", "/v1/chat/completions", *chat_body(temperature=3), 400, "'temperature' must be a number from 0 to 2"),
    "stream not a boolean": ("POST", "/v1/chat/completions", *chat_body(stream="yes"), 400, "'stream' must be true or false"),
    "broken multipart": ("POST", "/v1/audio/transcriptions", b"garbage", {"Content-Type": "multipart/form-data; boundary=xx"}, 400, "malformed multipart body"),
    "no file": ("POST", "/v1/audio/transcriptions", *multipart({"model": "echo-inputs"}), 400, "multipart field 'file' is required"),
    "JSON instead of a form": ("POST", "/v1/audio/transcriptions", *chat_body(), 400, "expected a multipart/form-data body"),
    "unreadable audio": ("POST", "/v1/audio/transcriptions", *multipart({}, b"not audio at all"), 400, "unreadable audio"),
    "unknown format": ("POST", "/v1/audio/transcriptions", *multipart({"response_format": "xml"}, CLIP), 400, "'response_format' must be one of"),
    "word timestamps": ("POST", "/v1/audio/transcriptions", *multipart({"timestamp_granularities[]": "word"}, CLIP), 422, "word timestamps are not supported"),
    "translation by a model that cannot": ("POST", "/v1/audio/translations", *multipart({}, CLIP), 422, "this model does not translate"),
    "file over --max-body-mb": ("POST", "/v1/audio/transcriptions", *multipart({}, b"\0" * (1024 * 1024 + 10)), 413, "request body too large (at most 1 MB)"),
    "body over --max-body-mb": ("POST", "/v1/chat/completions", b"{" + b" " * (1024 * 1024 + 10) + b"}", {"Content-Type": "application/json"}, 413, "request body too large (at most 1 MB)"),
}


@pytest.mark.parametrize("case", REFUSALS.values(), ids=REFUSALS.keys())
def test_every_refusal_is_an_openai_error_object_with_its_status(echo, case):
    method, path, body, headers, status, message = case
    got, response_headers, answer = echo.raw(method, path, body, headers)
    assert got == status, answer
    assert response_headers["Content-Type"].startswith("application/json")
    error = json.loads(answer)["error"]
    # As OpenAI answers: an unknown model is code model_not_found; every refusal is an invalid_request_error.
    assert message in error["message"] and error["code"] == ("model_not_found" if "does not exist here" in message else status)
    assert error["type"] == "invalid_request_error" and set(error) == {"message", "type", "param", "code"}
    assert b"Traceback" not in answer


@pytest.mark.parametrize("raw", [b"GARBAGE\r\n\r\n", b"GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"],
                         ids=["not HTTP", "broken header"])
def test_a_request_that_is_not_even_http_gets_an_error_object_too(echo, raw):
    port = int(echo.url.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(raw)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 400") and b"Content-Type: application/json" in head, answer
    error = json.loads(body)["error"]
    assert error["code"] == 400 and error["type"] == "invalid_request_error" and error["message"]


def test_models_list_and_model_card_answer_the_sdk(echo):
    assert [m.id for m in echo.client.models.list().data] == ["echo-inputs"]
    assert echo.client.models.retrieve("echo-inputs").id == "echo-inputs"
    with pytest.raises(openai.NotFoundError):
        echo.client.models.retrieve("whisper-1")


def test_n_choices_max_tokens_and_usage(echo):
    reply = echo.client.chat.completions.create(model="echo-inputs", messages=[{"role": "user", "content": "one two three"}], n=2, max_tokens=2)
    assert len(reply.choices) == 2 and [c.index for c in reply.choices] == [0, 1]
    assert {c.message.content for c in reply.choices} == {'{"system": null,'}
    assert {c.finish_reason for c in reply.choices} == {"length"}
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (3, 4, 7)
    with_max_completion = echo.client.chat.completions.create(model="echo-inputs", messages=[{"role": "user", "content": "x"}], max_completion_tokens=1)
    assert with_max_completion.choices[0].message.content == '{"system":'


def test_the_official_sdk_streams_a_reply_that_adds_up_to_the_plain_one(echo):
    messages = [{"role": "user", "content": [{"type": "text", "text": "Hear this."},
                                             {"type": "input_audio", "input_audio": {"data": base64.b64encode(CLIP).decode(), "format": "flac"}}]}]
    plain = echo.client.chat.completions.create(model="echo-inputs", messages=messages)
    stream = echo.client.chat.completions.create(model="echo-inputs", messages=messages, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == plain.usage.total_tokens


def test_a_stream_ends_with_done(echo):
    body, headers = chat_body(stream=True)
    status, response_headers, answer = echo.raw("POST", "/v1/chat/completions", body, headers)
    events = [line for line in answer.decode().split("\n\n") if line]
    assert status == 200 and response_headers["Content-Type"].startswith("text/event-stream")
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"


@pytest.mark.parametrize("response_format", ["json", "text", "srt", "vtt", "verbose_json"])
def test_every_transcription_format_through_the_sdk(echo, response_format):
    result = echo.client.audio.transcriptions.create(model="echo-inputs", file=("clip.flac", CLIP), response_format=response_format)
    said = '{"system": null, "parts": [{"text": "Transcribe the audio."}, {"audio_seconds": 2.161}]}'
    if response_format == "json":
        assert result.text == said
    elif response_format == "text":
        assert result.strip() == said
    elif response_format == "srt":
        assert result == f"1\n00:00:00,000 --> 00:00:02,161\n{said}\n\n"
    elif response_format == "vtt":
        assert result == f"WEBVTT\n\n00:00:00.000 --> 00:00:02.161\n{said}\n\n"
    else:
        assert (result.text, result.language, result.duration) == (said, "english", 2.161)
        assert [(s.start, s.end, s.text) for s in result.segments] == [(0.0, 2.161, said)]


def test_an_unknown_model_module_is_one_line_and_exit_2(tmp_path):
    out = subprocess.run([sys.executable, "-m", "lalmeval", "serve", "--model", "no_such_module:Thing"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "error: --model no_such_module:Thing: no module 'no_such_module' (run from the folder that holds it, or install it)"]


def test_the_core_and_the_server_import_no_model_library(tmp_path):
    code = ("import sys, lalmeval.cli.commands, lalmeval.run.runner, lalmeval.serve.app\n"
            "from lalmeval.serve.runtime import load_model\nload_model('echo').load()\n"
            "print(sorted(m for m in ('faster_whisper', 'ctranslate2', 'pocketsphinx', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_a_client_that_goes_away_leaves_the_queue(models_folder):
    with Served("--model", "gate_model:Gated", cwd=models_folder) as served, ThreadPoolExecutor(2) as pool:
        running = pool.submit(ask, served.client, "a")
        wait_for(served, running=1)
        impatient = openai.OpenAI(base_url=served.url, api_key="unused", max_retries=0, timeout=0.5)
        with pytest.raises(openai.APITimeoutError):
            ask(impatient, "b")
        wait_for(served, waiting=0)
        (models_folder / "open").touch()
        assert running.result() == "batch of 1: a"
        assert ask(served.client, "c") == "batch of 1: c"
        assert served.health()["batched_requests"] == 2

