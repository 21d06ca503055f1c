"""Demo model: offline CPU speech recognition with pocketsphinx and a voice-command grammar.

The grammar describes the task (spoken home-assistant commands), not any dataset's references.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Optional

import numpy as np

from lalmeval.data.audio import to_pcm16
from models.inference_boilerplate.model import AudioModel, ChatInput

GRAMMAR = Path(__file__).with_name("commands.jsgf")


class PocketsphinxCommands(AudioModel):
    """Recognizes each clip with the command grammar; the text prompt is ignored."""

    name = "pocketsphinx-commands"
    concurrency = 2

    def __init__(self) -> None:
        self._local = threading.local()

    def _decoder(self):
        decoder = getattr(self._local, "decoder", None)
        if decoder is None:
            from pocketsphinx import Decoder

            decoder = Decoder(lm=None, bestpath=False, logfn="/dev/null")
            decoder.add_jsgf_string("commands", GRAMMAR.read_text())
            decoder.activate_search("commands")
            self._local.decoder = decoder
        return decoder

    def load(self) -> None:
        self._decoder()

    def _recognize(self, audio: np.ndarray) -> str:
        # Trailing silence lets the grammar search reach its final state on clips that end abruptly.
        pcm = to_pcm16(np.concatenate([audio, np.zeros(8000, dtype=audio.dtype)])).tobytes()
        decoder = self._decoder()
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        hypothesis = decoder.hyp()
        return hypothesis.hypstr if hypothesis else ""

    def generate(self, request: ChatInput) -> str:
        return " ".join(self._recognize(a) for a in request.audios).strip()

    def transcribe(self, audio: np.ndarray, language: Optional[str], temperature: float) -> str:
        return self._recognize(audio)
