"""The one class to implement to serve your own model behind the OpenAI-compatible API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class ChatInput:
    """What a chat request asks of the model, already decoded."""

    text: str                      # the user's text parts, joined by newlines
    system: Optional[str]          # the system message, if any
    audios: list[np.ndarray]       # float32 mono clips at 16 kHz, in message order
    temperature: float = 0.0
    max_tokens: Optional[int] = None


class AudioModel:
    """Subclass this, set `name`, implement `generate` (and `transcribe` if it differs).

    `load` runs once before the server accepts requests. `generate` runs in worker threads,
    at most `concurrency` at a time; keep per-thread state in threading.local if needed.
    """

    name = "my-audio-model"
    concurrency = 1

    def load(self) -> None:
        """Load weights and anything slow."""

    def generate(self, request: ChatInput) -> str:
        """The reply text for one chat request."""
        raise NotImplementedError

    def transcribe(self, audio: np.ndarray, language: Optional[str], temperature: float) -> str:
        """The transcript of one clip (POST /v1/audio/transcriptions)."""
        return self.generate(ChatInput(text="Transcribe the audio.", system=None, audios=[audio], temperature=temperature))
