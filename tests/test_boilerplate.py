"""The inference boilerplate server, with the real pocketsphinx demo model, answering the openai client."""

import base64
import hashlib
import http.server
import json
import threading
from pathlib import Path

import numpy as np
import openai
import pytest

from lalmeval.data.messages import image_parts, interleave, to_openai_content
from lalmeval.media.images import ImageRef
from lalmeval.serve.chat import parse_chat
from lalmeval.serve.errors import BadRequest
from models.inference_boilerplate.model import AudioModel, ChatInput
from tests.support.served import Served
from tests.support.workspace import DEMO, REPO, demo_rows

IMAGES = Path(__file__).parent / "fixtures" / "images"


@pytest.fixture(scope="module")
def server():
    """The older entry, from the repository root, with its default model (pocketsphinx)."""
    with Served(cwd=REPO, module=["models.inference_boilerplate.server"]) as served:
        yield served.client


@pytest.fixture(scope="module")
def echo():
    with Served("--model", "echo") as served:
        yield served.client


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


# images


def sha1(name: str) -> str:
    return hashlib.sha1((IMAGES / name).read_bytes()).hexdigest()


def echoed(client, content, system=None) -> dict:
    """What the echo model says reached it."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
    return json.loads(client.chat.completions.create(model="echo-inputs", messages=messages).choices[0].message.content)


def test_images_reach_the_model_byte_identical_in_order_with_text_and_audio(echo):
    audio, _ = clip(0)
    refs = [ImageRef(name, IMAGES) for name in ("three.png", "grey.jpg", "four.gif", "stripes.webp")]
    parts = interleave("Compare <image 1> and <image 2>; hear <audio 1>; then <image 3> against <image 4>.", refs, audios=1)
    content = to_openai_content(parts, image_parts(parts), audio=lambda a: {"type": "input_audio", "input_audio": {"data": base64.b64encode(audio).decode(), "format": "flac"}})
    seen = echoed(echo, content, system="Be exact.")
    assert seen["system"] == "Be exact."
    assert [list(p)[0] for p in seen["parts"]] == ["text", "image", "text", "image", "text", "audio_seconds", "text", "image", "text", "image", "text"]
    images = [p for p in seen["parts"] if "image" in p]
    assert images == [
        {"image": "image/png", "bytes": 88, "sha1": sha1("three.png")},
        {"image": "image/jpeg", "bytes": 172, "sha1": sha1("grey.jpg")},
        {"image": "image/gif", "bytes": 43, "sha1": sha1("four.gif")},
        {"image": "image/webp", "bytes": 34, "sha1": sha1("stripes.webp")},
    ]
    assert [p["text"] for p in seen["parts"] if "text" in p] == ["Compare", "and", "; hear", "; then", "against", "."]
    assert seen["parts"][5]["audio_seconds"] > 0.5


def test_the_detail_hint_and_a_mislabelled_type_reach_the_model(echo):
    png = base64.b64encode((IMAGES / "three.png").read_bytes()).decode()
    seen = echoed(echo, [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + png, "detail": "low"}}])
    assert seen["parts"] == [{"image": "image/png", "bytes": 88, "sha1": sha1("three.png"), "detail": "low"}]


class CountingHandler(http.server.BaseHTTPRequestHandler):
    hits: list = []

    def do_GET(self):
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.end_headers()
        self.wfile.write((IMAGES / "three.png").read_bytes())

    def log_message(self, *args):
        pass


def test_http_image_urls_are_handed_to_the_model_not_fetched(echo):
    host = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
    threading.Thread(target=host.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{host.server_address[1]}/cat.png?size=large"
        seen = echoed(echo, [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": url}}])
        assert seen["parts"] == [{"text": "What is this?"}, {"image_url": url}]
        assert CountingHandler.hits == []
    finally:
        host.shutdown()


@pytest.mark.parametrize("image_url, reason", [
    ({"url": "data:image/png;base64,@@@not base64@@@"}, "data URI payload is not valid base64"),
    ({"url": "data:image/png;base64," + base64.b64encode(b"<html>404</html>").decode()}, "says image/png but its bytes are not an image"),
    ({"url": "data:text/plain;base64,aGVsbG8="}, "holds text/plain, not an image"),
    ({"url": "images/dog.jpg"}, "url must be a data: URI or an http(s) URL, not 'images/dog.jpg'"),
    ({"url": "http:///dog.jpg"}, "malformed image URL"),
    ({"detail": "high"}, "'image_url' must be an object with a string 'url'"),
    ({"url": "https://example.com/dog.jpg", "detail": 2}, "'detail' must be a string"),
])
def test_a_broken_image_part_is_a_400_that_names_the_part(echo, image_url, reason):
    content = [{"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": image_url}]
    with pytest.raises(openai.BadRequestError) as caught:
        echoed(echo, content)
    message = caught.value.body["message"]
    assert message.startswith("messages[0].content[1] (image_url): ") and reason in message


def test_image_url_given_as_a_plain_string_is_a_400(echo):
    with pytest.raises(openai.BadRequestError, match=r"messages\[1\]\.content\[0\] \(image_url\): 'image_url' must be an object"):
        echo.chat.completions.create(model="echo-inputs", messages=[
            {"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "image_url", "image_url": "https://example.com/a.png"}]},
        ])


def test_a_model_that_does_not_take_images_refuses_them_instead_of_answering_blind(server):
    png = base64.b64encode((IMAGES / "three.png").read_bytes()).decode()
    with pytest.raises(openai.UnprocessableEntityError, match="model pocketsphinx-commands does not take images"):
        server.chat.completions.create(model="pocketsphinx-commands", messages=[{"role": "user", "content": [
            {"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64," + png}},
        ]}])


def test_model_classes_written_before_images_still_build_and_take_chat_input():
    class Legacy(AudioModel):
        def generate(self, request: ChatInput) -> str:
            return f"{request.text}|{len(request.audios)}"

    old_style = ChatInput("Say hi.", None, [np.zeros(160, dtype=np.float32)], 0.0, None)
    assert (old_style.images, old_style.parts) == ([], [])
    assert Legacy().generate(old_style) == "Say hi.|1"
    assert Legacy.takes_images is False


def test_parse_chat_keeps_system_text_apart_and_everything_else_in_order():
    png = "data:image/png;base64," + base64.b64encode((IMAGES / "three.png").read_bytes()).decode()
    chat = parse_chat({"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": png}}, {"type": "text", "text": "What colour?"}]},
        {"role": "assistant", "content": "Red."},
        {"role": "user", "content": [{"type": "text", "text": "And now?"}, {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}]},
    ], "temperature": 0.2})
    assert chat.system == "Be brief."
    assert chat.text == "What colour?\nRed.\nAnd now?"
    assert [type(p).__name__ for p in chat.parts] == ["ImageInput", "str", "str", "str", "ImageInput"]
    assert chat.images[0].bytes == (IMAGES / "three.png").read_bytes() and chat.images[0].mime == "image/png"
    assert (chat.images[1].bytes, chat.images[1].url) == (None, "https://example.com/b.png")
    with pytest.raises(BadRequest, match="'temperature' must be a number from 0 to 2"):
        parse_chat({"messages": [{"role": "user", "content": "hi"}], "temperature": "warm"})
