"""The transcriber: spoken replies in the run folder sent to an /audio/transcriptions endpoint, each transcript
kept in the run's transcripts.jsonl under the hash of its audio, so a rescore does not transcribe again."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from pathlib import Path
from typing import Awaitable, Callable, Optional
from urllib.parse import urlsplit

from lalmeval.config.schema import ModelInfo
from lalmeval.config.secrets import NO_SECRETS, Redactor
from lalmeval.inference.client import Endpoint
from lalmeval.inference.ports import PORT, fill_ports
from lalmeval.inference.protocols import PROTOCOLS

CACHE_FILE = "transcripts.jsonl"


class Transcriber:
    """One pooled endpoint for every speech metric of a run, and the transcripts it has already given."""

    def __init__(self, info: ModelInfo, root: Path, redactor: Redactor = NO_SECRETS, stop: Optional[asyncio.Event] = None):
        self.info, self.root = info, root
        self.endpoint = Endpoint(info, redactor, stop)
        # Who transcribed: a launched server's port changes from run to run, its command and model do not.
        self.identity = json.dumps([info.model, info.launch or str(info.url)])
        self.path = root / CACHE_FILE
        self._known: Optional[dict[str, str]] = None
        self._pending: dict[str, asyncio.Future] = {}
        self.requested = 0   # transcripts asked of the endpoint (not found in the cache)
        self.before_request: Optional[Callable[[], Awaitable[None]]] = None   # e.g. start its server, when a rescore needs it after all

    def _load(self) -> dict[str, str]:
        known: dict[str, str] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    known[entry["key"]] = entry["text"]
                except (ValueError, KeyError, TypeError):
                    continue   # a line cut by a crash: that reply is transcribed again
        return known

    def _key(self, audio: bytes, language: str) -> str:
        return hashlib.sha256(audio + b"\0" + f"{self.identity}\0{language}".encode()).hexdigest()

    def _remember(self, key: str, text: str) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"key": key, "text": text}, ensure_ascii=False) + "\n")

    async def transcribe(self, audio_path: str, language: str = "en") -> str:
        """The transcript of a kept spoken reply (RequestFailed or OSError when there is none)."""
        loop = asyncio.get_running_loop()
        if self._known is None:
            self._known = await loop.run_in_executor(None, self._load)
        raw = await loop.run_in_executor(None, (self.root / audio_path).read_bytes)
        key = self._key(raw, language)
        if key in self._known:
            return self._known[key]
        if key in self._pending:   # the same audio asked twice at once (two metrics of one reply): one request
            return await asyncio.shield(self._pending[key])
        future = self._pending[key] = loop.create_future()
        try:
            text = await self._request(raw, Path(audio_path).name, language)
            self._known[key] = text
            await loop.run_in_executor(None, self._remember, key, text)
            future.set_result(text)
            return text
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()   # retrieved: a failure nobody else awaited is not logged as lost
            raise
        finally:
            del self._pending[key]

    async def _request(self, raw: bytes, name: str, language: str) -> str:
        # The file goes as it is kept: what is transcribed is exactly what a reader of the run folder hears.
        body, content_type = _form({"model": self.info.model, "language": language, "temperature": "0", "response_format": "json"}, raw, name)
        self.requested += 1
        if self.before_request is not None:
            await self.before_request()
        protocol = PROTOCOLS.get("transcription")
        reply = await self.endpoint.post(protocol.path, body, content_type, protocol.parse)
        return reply.value.text.strip()


def _form(fields: dict[str, str], audio: bytes, name: str) -> tuple[bytes, str]:
    """A multipart/form-data body: the fields, then the audio file under its own name."""
    boundary = uuid.uuid4().hex
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode() for key, value in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                 f'Content-Type: application/octet-stream\r\n\r\n'.encode())
    parts.extend((audio, f"\r\n--{boundary}--\r\n".encode()))
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


SPEECH_METRICS = frozenset({"speech_wer", "speech_consistency"})


def transcribes(metric: str) -> bool:
    """Whether a metric scores the transcript of spoken replies: speech_wer, speech_consistency, spoken:<any metric>."""
    return metric in SPEECH_METRICS or metric.startswith("spoken:")


def open_transcriber(info: ModelInfo, root: Path, redactor: Redactor = NO_SECRETS,
                     stop: Optional[asyncio.Event] = None) -> tuple[Transcriber, Optional[ModelInfo]]:
    """The transcriber of a config, its `{port}` filled with a free port, and the server to launch for it (if any)."""
    url = str(info.url)
    if PORT in url:
        url = fill_ports(url, 1, "transcriber")[0]
        info = info.model_copy(update={"url": url})
    port = urlsplit(url).port
    launch = info.model_copy(update={"launch": info.launch.replace("{port}", str(port) if port else "").replace("{replica}", "0")}) if info.launch else None
    return Transcriber(info, root, redactor, stop), launch
