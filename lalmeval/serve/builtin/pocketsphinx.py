"""`--model pocketsphinx`: offline CPU speech recognition with pocketsphinx and a voice-command grammar.

The grammar describes the task (spoken home-assistant commands), not any dataset's references.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
from pocketsphinx import Decoder

from lalmeval.media.audio import to_pcm16
from lalmeval.serve.model import AudioModel, ChatInput

GRAMMAR = Path(__file__).with_name("commands.jsgf")


class PocketsphinxCommands(AudioModel):
    """Recognizes each clip with the command grammar; the text prompt is ignored."""

    name = "pocketsphinx-commands"
    # pocketsphinx holds the GIL while it decodes: two threads would take turns, two processes run at once.
    processes = 2
    max_batch_size = 1
    languages = frozenset({"en"})
    needs_audio = True             # with no clip there is nothing to recognize  # its acoustic model and grammar are English

    def __init__(self) -> None:
        self._decoder: Optional[Decoder] = None

    def load(self) -> None:
        decoder = Decoder(lm=None, bestpath=False, logfn="/dev/null")
        decoder.add_jsgf_string("commands", GRAMMAR.read_text())
        decoder.activate_search("commands")
        self._decoder = decoder

    def _recognize(self, audio: np.ndarray) -> str:
        assert self._decoder is not None, "load() first"
        # Trailing silence lets the grammar search reach its final state on clips that end abruptly.
        pcm = to_pcm16(np.concatenate([audio, np.zeros(8000, dtype=audio.dtype)])).tobytes()
        self._decoder.start_utt()
        self._decoder.process_raw(pcm, full_utt=True)
        self._decoder.end_utt()
        hypothesis = self._decoder.hyp()
        return hypothesis.hypstr if hypothesis else ""

    def generate(self, request: ChatInput) -> str:
        return " ".join(self._recognize(a) for a in request.audios).strip()

    def transcribe(self, audio: np.ndarray, language: Optional[str], temperature: float) -> str:
        return self._recognize(audio)
