"""The one class to implement to serve your own model behind the OpenAI-compatible API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

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


class AudioModel:
    """Subclass this, set `name`, implement `generate` (and `transcribe` if it differs).

    `load` runs once before the server accepts requests. `generate` runs in worker threads,
    at most `concurrency` at a time; keep per-thread state in threading.local if needed.
    A model that reads images sets `takes_images = True`: one that would ignore them is refused
    image requests, so it is never scored on pictures it did not see.
    """

    name = "my-audio-model"
    concurrency = 1
    takes_images = False  # set True once generate() reads request.images; until then image requests get a 400

    def load(self) -> None:
        """Load weights and anything slow."""

    def generate(self, request: ChatInput) -> str:
        """The reply text for one chat request."""
        raise NotImplementedError

    def transcribe(self, audio: np.ndarray, language: Optional[str], temperature: float) -> str:
        """The transcript of one clip (POST /v1/audio/transcriptions)."""
        instruction = "Transcribe the audio."
        return self.generate(ChatInput(text=instruction, system=None, audios=[audio], temperature=temperature, parts=[instruction, audio]))
