"""`--model espeak-ng`: text said aloud by espeak-ng (a Debian package), and `--model whisper-espeak`: Whisper
tiny.en hears a spoken request and espeak-ng says what it heard, so spoken input gets a spoken answer."""

from __future__ import annotations

import io
import shutil
import subprocess
from typing import Sequence, Union

import numpy as np
import soundfile as sf

from lalmeval.errors import UserError
from lalmeval.serve.errors import ApiError, Unsupported
from lalmeval.serve.model import Answer, AudioModel, ChatInput, Reply, Speech, SpeechInput, TranscriptionInput

WORDS_PER_MINUTE = 175   # espeak-ng's own default rate; `speed` scales it
# OpenAI's voice names, so clients written for its API work unchanged, each mapped to an espeak-ng voice and variant.
VOICES = {"en-us": "en-us", "en-gb": "en-gb", "alloy": "en-us", "echo": "en-us+m3", "fable": "en-gb", "nova": "en-us+f3",
          "onyx": "en-us+m7", "shimmer": "en-us+f4"}
INSTALL = "espeak-ng is not installed: apt-get install espeak-ng (Debian/Ubuntu) or brew install espeak-ng (macOS)"


def say(text: str, voice: str = "en-us", speed: float = 1.0, program: str = "espeak-ng") -> Speech:
    """`text` synthesized by espeak-ng, as float32 samples at its own rate (22 050 Hz); nothing to say is no sound."""
    if not text.strip():
        return Speech(np.zeros(0, np.float32), 22050)
    # The text goes on stdin: a text starting with '-' is never read as an option.
    done = subprocess.run([program, "--stdout", "-v", VOICES.get(voice, voice), "-s", str(round(WORDS_PER_MINUTE * speed))],
                          input=text.encode("utf-8"), capture_output=True, timeout=300, check=False)
    if done.returncode != 0 or not done.stdout:
        raise RuntimeError(f"espeak-ng failed (exit {done.returncode}): {done.stderr.decode('utf-8', 'replace').strip()[:200]}")
    samples, rate = sf.read(io.BytesIO(done.stdout), dtype="float32", always_2d=False)
    return Speech(np.ascontiguousarray(samples, dtype=np.float32), int(rate))


class EspeakVoice(AudioModel):
    """Says the request's text: /v1/audio/speech, and chat answers with the user's text (spoken with modalities audio)."""

    name = "espeak-ng"
    concurrency = 2           # each request is its own espeak-ng process
    voices = tuple(VOICES)

    def load(self) -> None:
        self.program = shutil.which("espeak-ng")
        if self.program is None:
            raise UserError(f"--model {self.name}: {INSTALL}")

    def speak(self, request: SpeechInput) -> Speech:
        return say(request.text, request.voice or self.voices[0], request.speed, self.program or "espeak-ng")

    def heard(self, requests: Sequence[ChatInput]) -> list[Union[str, ApiError]]:
        """What each request asks to be said, or why it cannot be read (it holds only audio)."""
        return [r.text if r.text.strip() else self._no_text() for r in requests]

    def _no_text(self) -> ApiError:
        return Unsupported(f"model {self.name} says text and this request has none: serve whisper-espeak for spoken requests", "messages")

    def generate(self, request: ChatInput) -> Answer:
        return self.generate_batch([request])[0]

    def transcribe_batch(self, requests: Sequence[TranscriptionInput]) -> list:
        return [Unsupported(f"model {self.name} speaks and does not transcribe: serve whisper-espeak or whisper-tiny.en", "file")
                for _ in requests]

    def generate_batch(self, requests: Sequence[ChatInput]) -> list:
        out: list = []
        for request, text in zip(requests, self.heard(requests)):
            if isinstance(text, ApiError):
                out.append(text)
                continue
            text = " ".join(text.split())
            speech = self.speak(SpeechInput(text, request.voice)) if request.voice is not None else None
            out.append(Reply(text, self.count_tokens(text), self.count_tokens(request.text), speech=speech))
        return out


class WhisperEspeak(EspeakVoice):
    """A cascade: Whisper tiny.en transcribes the request's clips, espeak-ng says the transcript."""

    name = "whisper-espeak"
    max_batch_size = 8        # the clips of a batch are transcribed together

    def load(self) -> None:
        super().load()
        from lalmeval.serve.builtin.whisper import WhisperTinyEn  # faster-whisper loads only for this model
        self.whisper = WhisperTinyEn()
        self.whisper.load()

    def transcribe_batch(self, requests: Sequence[TranscriptionInput]) -> list:
        return self.whisper.transcribe_batch(requests)

    def heard(self, requests: Sequence[ChatInput]) -> list[Union[str, ApiError]]:
        spoken = [r for r in requests if r.audios]
        transcripts = iter(self.whisper.generate_batch([ChatInput("", None, r.audios, r.temperature, parts=list(r.audios)) for r in spoken]))
        out: list[Union[str, ApiError]] = []
        for request in requests:
            if not request.audios:
                out.append(request.text if request.text.strip() else self._no_text())
                continue
            reply = next(transcripts)
            out.append(reply.text if isinstance(reply, Reply) else reply if isinstance(reply, ApiError) else str(reply))
        return out
