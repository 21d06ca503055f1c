"""Content-addressed inference cache: identical deterministic requests are answered from disk."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional, Sequence

from lalmeval.config import ModelInfo
from lalmeval.records import Prompt
from lalmeval.store import JsonlWriter, WriteFailed, read_jsonl, safe_name


def request_key(info: ModelInfo, prompt: Prompt, params: dict[str, Any], audio_digests: Sequence[str], language: str,
                url: Optional[str] = None, image_digests: Sequence[str] = (), repeat: Optional[int] = None,
                long_audio: Optional[str] = None) -> str:
    """What determines a reply: endpoint (or replica group) and model id, inference type, the whole prompt
    (its layout of text, images and clips included), the audio and image bytes, the params, and which
    repeat it is (so no repeat is answered from another)."""
    layout = repr(prompt.conversation) if prompt.conversation is not None else None
    material = [(url or str(info.url)).rstrip("/"), info.model, info.inference_type, info.audio_format, info.chunk_size, long_audio,
                prompt.system, prompt.text, prompt.with_audio, layout, list(audio_digests), list(image_digests),
                language, params, repeat]
    return hashlib.sha256(json.dumps(material, ensure_ascii=False, default=str, sort_keys=True).encode()).hexdigest()


def deterministic(params: dict[str, Any]) -> bool:
    """Whether a reply can be reused: greedy decoding, or a fixed seed."""
    return params.get("temperature", 0) == 0 or params.get("seed") is not None


class InferenceCache:
    """Replies of one model by request key, in <dir>/<model>.jsonl (append-only)."""

    def __init__(self, folder: Path, model: str):
        self.path = folder / f"{safe_name(model)}.jsonl"
        self._replies: Optional[dict[str, str]] = None
        self._writer: Optional[JsonlWriter] = None
        self.hits = 0

    def load(self) -> None:
        """Read the file (blocking: call off the loop)."""
        if self._replies is None:
            self._replies = {item["key"]: item["reply"] for item in read_jsonl(self.path) if "key" in item and "reply" in item}

    def get(self, key: str) -> Optional[str]:
        reply = (self._replies or {}).get(key)
        if reply is not None:
            self.hits += 1
        return reply

    def put(self, key: str, reply: str) -> None:
        """Keep a reply. A refused write does not lose the reply in hand: the writer reports it and the run stops."""
        if self._replies is not None:
            self._replies[key] = reply
        try:
            if self._writer is None:
                self._writer = JsonlWriter(self.path)
            self._writer.write({"key": key, "reply": reply})
        except WriteFailed:
            pass

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
