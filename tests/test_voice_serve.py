"""`lalmeval serve --model espeak-ng` / `whisper-espeak`: real synthesized speech behind /v1/audio/speech and chat with
modalities audio, in OpenAI's shapes, checked with the official openai SDK against the real server process."""

import base64
import io
import json
import os
import shutil

import numpy as np
import openai
import pytest
import soundfile as sf

from tests.support.served import Served
from tests.support.workspace import DEMO, demo_rows


def _require_espeak() -> None:
    if shutil.which("espeak-ng") is None:
        if os.environ.get("LALMEVAL_REQUIRE_SYSTEM_PACKAGES"):
            pytest.fail("espeak-ng is required (LALMEVAL_REQUIRE_SYSTEM_PACKAGES is set) but not installed: apt-get install espeak-ng")
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng)")


@pytest.fixture(scope="module")
def espeak():
    _require_espeak()
    with Served("--model", "espeak-ng") as served:
        yield served


def _speech(served: Served, text: str, response_format: str, **more) -> tuple[int, dict, bytes]:
    body = json.dumps({"model": "espeak-ng", "input": text, "response_format": response_format, **more}).encode()
    return served.raw("POST", "/v1/audio/speech", body, {"Content-Type": "application/json"})


@pytest.mark.parametrize("response_format,mime", [("wav", "audio/wav"), ("flac", "audio/flac"), ("mp3", "audio/mpeg"), ("opus", "audio/ogg")])
def test_speech_endpoint_says_the_text_as_a_file_of_the_asked_format(espeak, response_format, mime):
    status, headers, body = _speech(espeak, "The quick brown fox jumps over the lazy dog.", response_format)
    assert status == 200 and headers["Content-Type"].startswith(mime)
    samples, rate = sf.read(io.BytesIO(body))
    assert 1.5 < len(samples) / rate < 5 and np.abs(samples).max() > 0.05   # seconds of real, audible speech


def test_speech_pcm_is_headerless_16_bit_at_24_khz_and_longer_text_takes_longer(espeak):
    _, _, short = _speech(espeak, "Hello.", "pcm")
    _, _, long = _speech(espeak, "Hello there, this sentence takes a good deal longer to say aloud.", "pcm")
    assert len(short) % 2 == 0 and short[:4] != b"RIFF"
    assert len(long) / 48000 > 2 * len(short) / 48000 > 0.3


def test_speech_refuses_an_unknown_format_or_voice_naming_the_ones_that_work(espeak):
    status, _, body = _speech(espeak, "hi", "aac")
    assert status == 400 and "wav, flac, mp3, opus, pcm" in json.loads(body)["error"]["message"]
    status, _, body = _speech(espeak, "hi", "wav", voice="nobody")
    assert status == 400 and "alloy" in json.loads(body)["error"]["message"]


def test_chat_with_modalities_audio_answers_with_openai_message_audio(espeak):
    reply = espeak.client.chat.completions.create(model="espeak-ng", modalities=["text", "audio"], audio={"voice": "nova", "format": "wav"},
                                                  messages=[{"role": "user", "content": "turn on the kitchen lights"}])
    message = reply.choices[0].message
    assert message.content is None and message.audio.transcript == "turn on the kitchen lights"
    assert message.audio.id.startswith("audio_") and message.audio.expires_at > 0
    samples, rate = sf.read(io.BytesIO(base64.b64decode(message.audio.data)))
    assert rate == 22050 and len(samples) / rate > 1.0


def test_a_streamed_spoken_reply_adds_up_to_the_transcript_and_the_pcm16_audio(espeak):
    stream = espeak.client.chat.completions.create(model="espeak-ng", modalities=["text", "audio"], audio={"voice": "alloy", "format": "pcm16"},
                                                   messages=[{"role": "user", "content": "play the radio in the living room"}], stream=True)
    transcript, pcm = [], b""
    for chunk in stream:
        audio = getattr(chunk.choices[0].delta, "audio", None) if chunk.choices else None
        if audio:
            transcript.append(getattr(audio, "transcript", None) or "")
            pcm += base64.b64decode(getattr(audio, "data", None) or "")
    assert "".join(transcript) == "play the radio in the living room"
    _, _, whole = _speech(espeak, "play the radio in the living room", "pcm")
    assert pcm == whole   # the same synthesis, sent in pieces


def test_a_streamed_spoken_reply_in_another_format_than_pcm16_is_refused_with_the_fix(espeak):
    with pytest.raises(openai.BadRequestError, match="set audio.format to pcm16"):
        espeak.client.chat.completions.create(model="espeak-ng", modalities=["text", "audio"], audio={"voice": "alloy", "format": "wav"},
                                              messages=[{"role": "user", "content": "hi"}], stream=True)


def test_a_model_that_does_not_speak_refuses_a_spoken_reply_with_422():
    with Served("--model", "echo") as served:
        with pytest.raises(openai.UnprocessableEntityError, match="does not speak"):
            served.client.chat.completions.create(model="echo-inputs", modalities=["text", "audio"], audio={"voice": "alloy", "format": "wav"},
                                                  messages=[{"role": "user", "content": "hi"}])
        status, _, _ = served.raw("POST", "/v1/audio/speech", json.dumps({"input": "hi"}).encode(), {"Content-Type": "application/json"})
        assert status == 422


@pytest.mark.slow
def test_the_cascade_hears_a_spoken_request_and_says_what_it_heard():
    _require_espeak()
    row = demo_rows(1)[0]
    clip = base64.b64encode((DEMO / row["audio"]).read_bytes()).decode()
    with Served("--model", "whisper-espeak", timeout=300) as served:
        reply = served.client.chat.completions.create(
            model="whisper-espeak", modalities=["text", "audio"], audio={"voice": "alloy", "format": "wav"},
            messages=[{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": clip, "format": "flac"}}]}])
        said = reply.choices[0].message.audio
        assert said.transcript == "What is the weather this weekend?"   # Whisper tiny.en's transcript of cmd000
        # and what it said is speech Whisper hears as the same words
        heard = served.client.audio.transcriptions.create(model="whisper-espeak", file=("r.wav", base64.b64decode(said.data)))
        assert heard.text.strip().lower().rstrip("?.") == "what is the weather this weekend"
