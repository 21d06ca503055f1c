"""`lalmeval serve` held to what OpenAI's API does, where a client notices: languages, stop sequences,
empty audio, the port, shutdown and API keys — against the real server process, real clips, the
official openai SDK and raw HTTP."""

import base64
import json
import signal
import socket
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from tests.support.served import Served
from tests.support.workspace import DEMO, demo_rows

CLIP = (DEMO / demo_rows(1)[0]["audio"]).read_bytes()  # "what is the weather this weekend"

MODELS = '''
import pathlib, time
from lalmeval.serve import AudioModel

HERE = pathlib.Path(__file__).parent

class Gated(AudioModel):
    """Holds every batch until the test creates the file `open`."""
    name = "gated"

    def generate(self, request):
        while not (HERE / "open").exists():
            time.sleep(0.02)
        return "done"

class Marked(AudioModel):
    """Leaves the file `loaded` behind when its weights load."""
    name = "marked"

    def load(self):
        (HERE / "loaded").touch()

    def generate(self, request):
        return "fine"
'''


@pytest.fixture
def models_folder(tmp_path):
    (tmp_path / "review_models.py").write_text(textwrap.dedent(MODELS))
    return tmp_path


@pytest.fixture(scope="module")
def echo():
    with Served("--model", "echo") as served:
        yield served


@pytest.fixture(scope="module")
def sphinx():
    with Served("--model", "pocketsphinx") as served:
        yield served


def error_of(answer: bytes) -> dict:
    error = json.loads(answer)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def test_an_english_only_recognizer_takes_english_by_any_name_and_refuses_other_languages(sphinx):
    for language in ("en", "eng", "English", "en-GB"):
        said = sphinx.client.audio.transcriptions.create(model="pocketsphinx-commands", file=("c.flac", CLIP), language=language)
        assert said.text == "what is the weather this weekend", language
    with pytest.raises(openai.BadRequestError, match="'language' must be an ISO-639-1 code such as 'en', not 'zz'"):
        sphinx.client.audio.transcriptions.create(model="pocketsphinx-commands", file=("c.flac", CLIP), language="zz")  # no language at all
    for language in ("de", "deu"):
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            sphinx.client.audio.transcriptions.create(model="pocketsphinx-commands", file=("c.flac", CLIP), language=language)
        assert refused.value.body["param"] == "language"
        assert refused.value.body["message"].startswith("model pocketsphinx-commands transcribes English only, not ")


def test_a_recognizer_refuses_a_chat_request_without_audio_instead_of_answering_nothing(sphinx):
    with pytest.raises(openai.UnprocessableEntityError, match="model pocketsphinx-commands answers audio only: this request has no input_audio"):
        sphinx.client.chat.completions.create(model="pocketsphinx-commands", messages=[{"role": "user", "content": "turn on the light"}])


def test_simultaneous_requests_to_a_model_of_several_worker_processes_are_all_answered(sphinx):
    """Two batches in the model at once, each finishing while the other runs: every client gets its transcript
    (a worker that died comparing two batches' clips left all later requests waiting for ever)."""
    clips = [(DEMO / row["audio"]).read_bytes() for row in demo_rows(8)]

    def transcribe(clip: bytes) -> str:
        return sphinx.client.with_options(timeout=60, max_retries=0).audio.transcriptions.create(
            model="pocketsphinx-commands", file=("c.flac", clip)).text

    alone = [transcribe(clip) for clip in clips]
    with ThreadPoolExecutor(8) as pool:
        for _ in range(2):
            assert list(pool.map(transcribe, clips)) == alone   # every request answered, each with its own clip's transcript


def test_stop_sequences_cut_the_reply_before_them_plain_and_streamed(echo):
    messages = [{"role": "user", "content": "hello"}]
    whole = echo.client.chat.completions.create(model="echo-inputs", messages=messages).choices[0].message.content
    assert whole == '{"system": null, "parts": [{"text": "hello"}]}'
    cut = echo.client.chat.completions.create(model="echo-inputs", messages=messages, stop=["nothing like it", '"parts"'])
    assert cut.choices[0].message.content == '{"system": null, ' and cut.choices[0].finish_reason == "stop"
    assert cut.usage.completion_tokens == 2  # the words kept, not the words the model said
    streamed = echo.client.chat.completions.create(model="echo-inputs", messages=messages, stop="null", stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == '{"system": '


@pytest.mark.parametrize("stop", [5, ["a", 1], [""], ["a", "b", "c", "d", "e"]], ids=["number", "number in list", "empty", "five"])
def test_a_stop_that_openai_would_refuse_is_a_400(echo, stop):
    body = json.dumps({"model": "echo-inputs", "messages": [{"role": "user", "content": "x"}], "stop": stop}).encode()
    status, _, answer = echo.raw("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    assert status == 400 and error_of(answer)["param"] == "stop"


def test_more_choices_than_the_queue_holds_is_a_400_not_a_503_to_retry_for_ever():
    with Served("--model", "echo", "--max-queue", "2") as served:
        with pytest.raises(openai.BadRequestError, match=r"'n' is 3, more than this server queues at once \(--max-queue 2\)"):
            served.client.chat.completions.create(model="echo-inputs", messages=[{"role": "user", "content": "x"}], n=3)
        assert len(served.client.chat.completions.create(model="echo-inputs", messages=[{"role": "user", "content": "x"}], n=2).choices) == 2


def test_empty_or_unreadable_audio_is_a_400_that_says_what_was_wrong(echo):
    with pytest.raises(openai.BadRequestError, match=r"'file' is empty \(0 bytes\)"):
        echo.client.audio.transcriptions.create(model="echo-inputs", file=("a.wav", b""))
    with pytest.raises(openai.BadRequestError) as unreadable:
        echo.client.audio.transcriptions.create(model="echo-inputs", file=("a.wav", b"RIFF but no audio in here at all"))
    # Both decoders' reasons, and no object address that changes per call.
    assert unreadable.value.body["message"] == ("unreadable audio: neither libsndfile (Format not recognised) nor FFmpeg "
                                                "(Invalid data found when processing input) reads its bytes")
    content = [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]
    with pytest.raises(openai.BadRequestError, match=r"messages\[0\]\.content\[0\] \(input_audio\): audio data is empty"):
        echo.client.chat.completions.create(model="echo-inputs", messages=[{"role": "user", "content": content}])


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "lalmeval", "serve", *args]


def test_a_port_out_of_range_is_one_line_and_exit_2(tmp_path):
    out = subprocess.run(serve_command("--model", "echo", "--port", "70000"), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == ["error: --port must be from 0 to 65535, not 70000"]


def test_a_port_in_use_is_refused_in_one_line_before_the_model_loads(models_folder):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(serve_command("--model", "review_models:Marked", "--port", str(port)), cwd=models_folder,
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [f"error: cannot listen on 127.0.0.1:{port}: Address already in use"]
    assert not (models_folder / "loaded").exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_server_even_while_the_model_is_busy_and_waiting_requests_get_503(models_folder, sig):
    served = Served("--model", "review_models:Gated", cwd=models_folder)
    try:
        with ThreadPoolExecutor(2) as pool:
            asked = [pool.submit(served.client.chat.completions.create, model="gated", messages=[{"role": "user", "content": t}]) for t in "ab"]
            deadline = time.time() + 60
            while served.health()["waiting"] != 1:  # one request in the model, one waiting behind it
                assert time.time() < deadline
                time.sleep(0.02)
            served.proc.send_signal(sig)
            assert served.proc.wait(30) == 0  # the model never finishes its batch: the server does not wait for it
            for future in asked:
                with pytest.raises(openai.APIStatusError) as refused:
                    future.result()
                assert refused.value.status_code == 503 and refused.value.body["message"] == "server is shutting down"
    finally:
        served.close()
    assert "Traceback" not in "".join(served.output)


SECRET = "sk-serve-test-7f3a9c"


@pytest.mark.parametrize("given", [{"env": {"LALMEVAL_SERVE_API_KEY": SECRET}}, {"args": ("--api-key", SECRET)}], ids=["environment", "option"])
def test_a_configured_api_key_is_required_in_openais_shape_and_never_echoed(given):
    with Served("--model", "echo", *given.get("args", ()), env=given.get("env")) as served:
        for key in (None, "sk-wrong"):
            headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
            body = json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode()
            status, _, answer = served.raw("POST", "/v1/chat/completions", body, headers)
            error = error_of(answer)
            assert status == 401 and error["type"] == "invalid_request_error" and error["code"] == "invalid_api_key"
            assert SECRET not in answer.decode() and "sk-wrong" not in answer.decode()
        with pytest.raises(openai.AuthenticationError):
            served.client.models.list()  # the helper's client sends the key "unused"
        keyed = openai.OpenAI(base_url=served.url, api_key=SECRET, max_retries=0)
        assert [m.id for m in keyed.models.list().data] == ["echo-inputs"]
        assert keyed.audio.transcriptions.create(model="echo-inputs", file=("c.flac", CLIP)).text.startswith('{"system": null')
        assert served.raw("GET", "/health")[0] == 200  # liveness probes carry no key
    assert SECRET not in "".join(served.output)
