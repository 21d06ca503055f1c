"""The inference boilerplate server, with the real pocketsphinx demo model, answering the openai client."""

import base64
import socket
import subprocess
import sys
import time

import openai
import pytest

from tests.support.workspace import DEMO, REPO, demo_rows


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "models.inference_boilerplate.server", "--port", str(port)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)
    deadline = time.time() + 60
    while True:
        try:
            client.models.list()
            break
        except openai.APIConnectionError:
            assert proc.poll() is None and time.time() < deadline, proc.stdout.read().decode()
            time.sleep(0.2)
    yield client
    proc.terminate()
    proc.wait(10)


def clip(index=0):
    row = demo_rows()[index]
    return (DEMO / row["audio"]).read_bytes(), row["reference"]


def test_models_endpoint_lists_the_demo_model(server):
    assert [m.id for m in server.models.list().data] == ["pocketsphinx-commands"]


@pytest.mark.parametrize("index", [0, 1, 3])
def test_chat_completion_with_input_audio_recognizes_real_speech(server, index):
    audio, reference = clip(index)
    reply = server.chat.completions.create(
        model="pocketsphinx-commands",
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "Transcribe the spoken command."},
            {"type": "input_audio", "input_audio": {"data": base64.b64encode(audio).decode(), "format": "flac"}},
        ]}],
    )
    assert reply.choices[0].message.content == reference


def test_chat_completion_accepts_audio_url_data_uri(server):
    audio, reference = clip(0)
    reply = server.chat.completions.create(
        model="pocketsphinx-commands",
        messages=[{"role": "user", "content": [{"type": "audio_url", "audio_url": {"url": "data:audio/flac;base64," + base64.b64encode(audio).decode()}}]}],
    )
    assert reply.choices[0].message.content == reference


def test_transcriptions_endpoint(server):
    audio, reference = clip(1)
    result = server.audio.transcriptions.create(model="pocketsphinx-commands", file=("clip.flac", audio), language="en")
    assert result.text == reference


def test_bad_audio_is_a_400_with_a_message(server):
    with pytest.raises(openai.BadRequestError, match="unreadable audio"):
        server.chat.completions.create(
            model="pocketsphinx-commands",
            messages=[{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": base64.b64encode(b"not audio").decode(), "format": "wav"}}]}],
        )
