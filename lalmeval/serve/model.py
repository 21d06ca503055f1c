"""The one class to implement to serve your own model behind the OpenAI-compatible API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

import numpy as np


@dataclass(frozen=True)
class ImageInput:
    """One image of a chat request: its bytes when sent inline, or the URL it was given by."""

    bytes: Optional[bytes]          # the decoded data: URI, byte for byte; None for an http(s) URL
    mime: Optional[str]             # from the bytes' signature when known, else as the URI declares; None for a URL
    url: Optional[str]              # the http(s) URL, which the server does not fetch; None for inline images
    detail: Optional[str] = None    # OpenAI's "auto" | "low" | "high", when the request gives one

    def __repr__(self) -> str:
        held = f"{len(self.bytes)} bytes" if self.bytes is not None else repr(self.url)
        return f"ImageInput({held}, mime={self.mime!r}, detail={self.detail!r})"


Part = Union[str, np.ndarray, ImageInput]


@dataclass(frozen=True)
class ChatInput:
    """What a chat request asks of the model, already decoded."""

    text: str                      # the user's text parts, joined by newlines
    system: Optional[str]          # the system message, if any
    audios: list[np.ndarray]       # float32 mono clips at 16 kHz, in message order
    temperature: float = 0.0
    max_tokens: Optional[int] = None
    images: list[ImageInput] = field(default_factory=list)  # in message order
    parts: list[Part] = field(default_factory=list)  # non-system text, clips and images, interleaved as sent
    stop: tuple[str, ...] = ()     # the reply ends before the first of these (the server cuts it; a model may stop early)
    voice: Optional[str] = None    # set when the request asks for a spoken reply (modalities audio): the voice to speak in


@dataclass(frozen=True)
class TranscriptionInput:
    """What POST /v1/audio/transcriptions (or /translations) asks of the model."""

    audio: np.ndarray               # float32 mono at 16 kHz
    language: Optional[str] = None  # ISO-639-1 code, when the request gives one
    prompt: Optional[str] = None    # text the transcript should follow on from (spelling, names)
    temperature: float = 0.0
    task: str = "transcribe"        # or "translate" (into English)
    timestamps: bool = False        # the reply format shows segment times (verbose_json, srt, vtt)


@dataclass(frozen=True)
class SpeechInput:
    """What POST /v1/audio/speech asks of the model: text to say aloud, in a voice."""

    text: str
    voice: Optional[str] = None
    speed: float = 1.0


@dataclass(frozen=True)
class Speech:
    """Synthesized speech: float32 mono samples in [-1, 1] at `rate` Hz."""

    samples: np.ndarray
    rate: int

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.rate


@dataclass(frozen=True)
class Segment:
    """A timed piece of a transcript (seconds from the start of the clip)."""

    start: float
    end: float
    text: str
    tokens: tuple[int, ...] = ()
    avg_logprob: float = 0.0
    no_speech_prob: float = 0.0
    compression_ratio: float = 0.0


@dataclass(frozen=True)
class Reply:
    """A model's answer with what it cost. A model may return a plain str instead: the server then
    counts tokens with the model's `count_tokens` and makes one segment of the whole clip."""

    text: str
    completion_tokens: int
    prompt_tokens: int = 0
    audio_tokens: int = 0           # part of prompt_tokens: positions the audio took in the model's input
    finish_reason: str = "stop"     # "length" when max_tokens cut the answer short
    segments: tuple[Segment, ...] = ()
    language: Optional[str] = None
    speech: Optional[Speech] = None   # the spoken reply, when the request asked for one (ChatInput.voice) or for speech


Answer = Union[str, Reply]


class AudioModel:
    """Subclass this, set `name`, implement `generate` (and `transcribe` if it differs).

    `load` runs once before the server accepts requests. Requests from all connections are
    gathered into batches of at most `max_batch_size`: override `generate_batch` /
    `transcribe_batch` to run a batch in one forward pass (the defaults call `generate` /
    `transcribe` once per request); an answer may be an `ApiError` (e.g. `Unsupported`) refusing
    that request alone. At most `concurrency` batches run at a time, in threads —
    or in `processes` worker processes (each loads its own copy) for a model that holds the GIL.
    A model that reads images sets `takes_images = True`: one that would ignore them is refused
    image requests, so it is never scored on pictures it did not see.
    """

    name = "my-audio-model"
    concurrency = 1
    processes = 0           # >0: run batches in this many worker processes instead of threads
    max_batch_size = 1      # requests handed to generate_batch / transcribe_batch at once
    takes_images = False    # set True once generate() reads request.images; until then image requests get a 422
    translates = False      # set True when transcribe_batch handles task="translate"
    needs_audio = False     # True for a recognizer: a chat request with no clip gets a 422, not an empty "answer"
    languages: Optional[frozenset[str]] = None  # ISO-639-1 codes it transcribes; None: any (another is refused with 422)
    voices: tuple[str, ...] = ()  # the voices it speaks in (the first is the default); () : it does not speak, and spoken replies get a 422

    def load(self) -> None:
        """Load weights and anything slow."""

    def generate(self, request: ChatInput) -> Answer:
        """The reply for one chat request."""
        raise NotImplementedError

    def transcribe(self, audio: np.ndarray, language: Optional[str], temperature: float) -> Answer:
        """The transcript of one clip (POST /v1/audio/transcriptions)."""
        instruction = "Transcribe the audio."
        return self.generate(ChatInput(text=instruction, system=None, audios=[audio], temperature=temperature, parts=[instruction, audio]))

    def generate_batch(self, requests: Sequence[ChatInput]) -> list[Answer]:
        """Replies to several chat requests, in order (override to run them as one batch)."""
        return [self.generate(r) for r in requests]

    def transcribe_batch(self, requests: Sequence[TranscriptionInput]) -> list[Answer]:
        """Transcripts of several clips, in order (override to run them as one batch, or to use prompts)."""
        return [self.transcribe(r.audio, r.language, r.temperature) for r in requests]

    def speak(self, request: SpeechInput) -> Speech:
        """`request.text` said aloud (POST /v1/audio/speech); a model with `voices` implements it."""
        raise NotImplementedError

    def speak_batch(self, requests: Sequence[SpeechInput]) -> list[Union[Reply, Speech]]:
        """Speech for several texts, in order (override to synthesize them as one batch)."""
        return [self.speak(r) for r in requests]

    def count_tokens(self, text: str) -> int:
        """Tokens in `text` for `usage` when a reply is a plain str: words, unless the model has a tokenizer."""
        return len(text.split())
