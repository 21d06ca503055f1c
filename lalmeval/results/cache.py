"""Content-addressed inference cache: identical deterministic requests are answered from disk."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Optional, Sequence

from lalmeval.config.generation import request_fields
from lalmeval.config.schema import ModelInfo
from lalmeval.results.records import Prompt
from lalmeval.results.store import JsonlWriter, WriteFailed, file_name, read_jsonl


def request_key(info: ModelInfo, prompt: Prompt, params: dict[str, Any], audio_digests: Sequence[str], language: str,
                url: Optional[str] = None, image_digests: Sequence[str] = (), repeat: Optional[int] = None,
                long_audio: Optional[str] = None) -> str:
    """What determines a reply — everything a request sends but its credentials: endpoint (or replica
    group), API version, model id, inference type, the whole prompt (its layout of text, images and clips,
    and a dialogue's later turns, included), the audio and image bytes, the params, and which repeat it
    is (so no repeat is answered from another)."""
    layout = repr(prompt.conversation) if prompt.conversation is not None else None
    material = [(url or str(info.url)).rstrip("/"), info.model, info.inference_type, info.audio_format, info.chunk_size, long_audio,
                prompt.system, prompt.text, prompt.with_audio, layout, list(audio_digests), list(image_digests),
                language, params, repeat]
    # Added only when there is one, so the keys of requests without them (stored records, caches) stay valid.
    if info.api_version:
        material.append({"api-version": info.api_version})
    if prompt.followups:
        material.append({"followups": repr(prompt.followups)})
    if info.inference_type == "transcription":  # its requests no longer send the instruction as `prompt`: earlier replies do not answer them
        material.append({"prompt": "transcription_prompt"})
    if info.speaks:   # a spoken reply is another reply than a written one, and differs by voice and format
        material.append({"modalities": list(info.modalities), "voice": info.spoken.voice, "format": info.spoken.format})
    return hashlib.sha256(json.dumps(material, ensure_ascii=False, default=str, sort_keys=True).encode()).hexdigest()


def deterministic(params: dict[str, Any]) -> bool:
    """Whether a reply can be reused, judged from the fields the request sends (extra_body's keys
    replace the settings they name): a seed, or greedy decoding — temperature 0 or top_k 1.
    A temperature that is not sent is the server's default (1 for OpenAI): sampled."""
    fields = request_fields(params)
    if fields.get("seed") is not None:
        return True
    temperature, top_k = fields.get("temperature"), fields.get("top_k")
    greedy = isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature == 0
    return greedy or (isinstance(top_k, int) and not isinstance(top_k, bool) and top_k == 1)


def cache_file(folder: Path, model: str) -> Path:
    """The cache file of one model (or judge) in the cache folder."""
    return folder / file_name([model], ".jsonl")


EARLIER_RUN = "an earlier run"   # where an entry written before entries named their run came from


class InferenceCache:
    """Replies of one model by request key, in <dir>/<model>.jsonl (append-only), each with the run that asked for it."""

    def __init__(self, folder: Path, model: str, run_id: Optional[str] = None, only_run: Optional[str] = None):
        self.path = cache_file(folder, model)
        self.run_id = run_id
        self.only_run = only_run   # reuse only the entries this run wrote (a judge without the cross-run cache)
        self._replies: Optional[dict[str, tuple[str, Optional[str]]]] = None
        self._writer: Optional[JsonlWriter] = None
        self.hits = 0

    def load(self) -> None:
        """Read the file (blocking: call off the loop)."""
        if self._replies is None:
            self._replies = {item["key"]: (item["reply"], item.get("run")) for item in read_jsonl(self.path, "cache file")
                             if "key" in item and "reply" in item and (self.only_run is None or item.get("run") == self.only_run)}

    def get(self, key: str) -> Optional[str]:
        entry = (self._replies or {}).get(key)
        if entry is not None:
            self.hits += 1
        return entry[0] if entry is not None else None

    def origin(self, key: str) -> str:
        """The run whose request put the entry there ('an earlier run' for entries that do not say)."""
        entry = (self._replies or {}).get(key)
        return str(entry[1]) if entry is not None and entry[1] else EARLIER_RUN

    def put(self, key: str, reply: str) -> None:
        """Keep a reply. A refused write does not lose the reply in hand: the writer reports it and the run stops."""
        if self._replies is not None:
            self._replies[key] = (reply, self.run_id)
        try:
            if self._writer is None:
                self._writer = JsonlWriter(self.path)
            self._writer.write({"key": key, "reply": reply, **({"run": self.run_id} if self.run_id else {})})
        except WriteFailed:
            pass

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
