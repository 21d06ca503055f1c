"""A speaking model behind worker processes survives itself like a chat model: a worker that dies saying a text fails
that request alone and is replaced, and a malformed speech answer is that request's 500 "model bug" — against the real
server process and a model class written by the test."""

import io
import json
import textwrap
import time

import pytest
import soundfile as sf

from tests.support.served import Served

MODELS = '''
import os, signal
import numpy as np
from lalmeval.serve import AudioModel, Reply
from lalmeval.serve.model import Speech

class Speaker(AudioModel):
    """One worker process that speaks: a tone of 0.5 s, or the death or malformed answer its text names."""
    name = "speaker"
    processes = 1
    voices = ("alloy",)

    def speak(self, request):
        if request.text == "exit":
            os._exit(3)
        if request.text == "oom":
            os.kill(os.getpid(), signal.SIGKILL)
        if request.text == "written":
            return Reply("written, not said", 3)
        if request.text == "number":
            return 42
        if request.text == "silent nan":
            return Speech(np.full(800, np.nan, dtype=np.float32), 16000)
        return tone()

    def generate(self, request):
        if request.text == "written":
            return Reply("written, not said", 3)
        if request.text == "silent nan":
            return Reply("said", 1, speech=Speech(np.full(800, np.nan, dtype=np.float32), 16000))
        return Reply(f"said: {request.text}", 2, speech=tone())

def tone():
    return Speech((0.3 * np.sin(np.arange(8000) / 8000 * 2 * np.pi * 440)).astype(np.float32), 16000)
'''


@pytest.fixture
def speaker(tmp_path):
    (tmp_path / "speaking_models.py").write_text(textwrap.dedent(MODELS))
    with Served("--model", "speaking_models:Speaker", cwd=tmp_path) as served:
        yield served


def say(served: Served, text: str) -> tuple[int, bytes]:
    body = json.dumps({"model": "speaker", "input": text, "response_format": "wav"}).encode()
    status, _, answer = served.raw("POST", "/v1/audio/speech", body, {"Content-Type": "application/json"})
    return status, answer


def said_seconds(answer: bytes) -> float:
    samples, rate = sf.read(io.BytesIO(answer))
    return len(samples) / rate


def test_a_worker_dying_mid_speech_fails_that_request_alone_and_the_next_is_said(speaker):
    status, answer = say(speaker, "hello")
    assert status == 200 and said_seconds(answer) == pytest.approx(0.5, abs=0.05)
    for death, how in (("exit", "exited with code 3"), ("oom", "killed by SIGKILL")):
        status, answer = say(speaker, death)
        assert status == 500 and how in json.loads(answer)["error"]["message"]
        deadline = time.time() + 60
        while speaker.health()["status"] != "ok":
            assert time.time() < deadline
            time.sleep(0.05)
        status, answer = say(speaker, "again")
        assert status == 200 and said_seconds(answer) == pytest.approx(0.5, abs=0.05)
    assert "Traceback" not in "".join(speaker.output)


@pytest.mark.parametrize("text,why", [("written", "without speech"), ("number", "said int, not Speech"), ("silent nan", "not one finite channel")])
def test_a_speech_answer_that_is_no_speech_is_that_requests_model_bug(speaker, text, why):
    status, answer = say(speaker, text)
    message = json.loads(answer)["error"]["message"]
    assert status == 500 and message.startswith("model bug: ") and why in message, message
    status, _ = say(speaker, "hello")
    assert status == 200
    assert "Traceback" not in "".join(speaker.output)


def spoken_chat(served: Served, text: str) -> tuple[int, dict]:
    body = json.dumps({"model": "speaker", "modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"},
                       "messages": [{"role": "user", "content": text}]}).encode()
    status, _, answer = served.raw("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    return status, json.loads(answer)


@pytest.mark.parametrize("text,why", [("written", "without speech"), ("silent nan", "not one finite channel")])
def test_a_spoken_chat_reply_without_usable_speech_is_that_requests_model_bug(speaker, text, why):
    status, answer = spoken_chat(speaker, text)
    assert status == 500 and answer["error"]["message"].startswith("model bug: ") and why in answer["error"]["message"], answer
    status, answer = spoken_chat(speaker, "hello")
    assert status == 200 and answer["choices"][0]["message"]["audio"]["transcript"] == "said: hello"
    assert "Traceback" not in "".join(speaker.output)
