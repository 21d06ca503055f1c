"""One inference pass of a dataset on a model, shared by every Engine of that dataset."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import replace
from typing import Any, AsyncIterator, Optional

from lalmeval.cache import InferenceCache, deterministic, request_key
from lalmeval.config import ModelInfo
from lalmeval.data.audio import AudioError, PreparedAudio, prepare
from lalmeval.inference.client import Endpoint, RequestFailed
from lalmeval.inference.protocols import Protocol, ReplyError
from lalmeval.options import RunOptions
from lalmeval.postprocess.base import Postprocessor
from lalmeval.preprocess.base import Preprocessor
from lalmeval.records import Prompt, Record, Sample
from lalmeval.store import JsonlWriter, RunStore


class RecordStream:
    """Records in completion order, replayed in batches to each reader as they arrive."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.closed = False
        self._event = asyncio.Event()

    def push(self, record: Record) -> None:
        self.records.append(record)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def batches(self, max_size: int = 256) -> AsyncIterator[list[Record]]:
        """Yield every record once, in batches of what has arrived, until the pass ends."""
        index = 0
        while True:
            if index < len(self.records):
                batch = self.records[index : index + max_size]
                index += len(batch)
                yield batch
            elif self.closed:
                return
            else:
                await self._event.wait()


class AudioCache:
    """Prepared clips shared by the models of one dataset; bounded, so memory stays flat."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[str, asyncio.Future] = OrderedDict()

    async def get(self, sample: Sample) -> PreparedAudio:
        future = self._items.get(sample.id)
        if future is None:
            future = asyncio.get_running_loop().run_in_executor(None, prepare, sample.audio_source)
            self._items[sample.id] = future
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(sample.id)
        return await future


def _encode_chunks(audio: PreparedAudio, seconds: Optional[float]) -> list[PreparedAudio]:
    return [piece.encoded() for piece in audio.chunks(seconds)]


class InferenceJob:
    """Runs every pending sample of a dataset through one endpoint and publishes the records."""

    def __init__(
        self, dataset: str, language: str, samples: list[Sample], endpoint: Endpoint, protocol: Protocol,
        preprocessor: Preprocessor, postprocessor: Postprocessor, params: dict[str, Any],
        audio: AudioCache, store: RunStore, options: RunOptions = RunOptions(),
        cache: Optional[InferenceCache] = None, stop: Optional[asyncio.Event] = None,
    ):
        self.dataset, self.language, self.samples = dataset, language, samples
        self.endpoint, self.protocol = endpoint, protocol
        self.preprocessor, self.postprocessor = preprocessor, postprocessor
        self.params, self.audio, self.store = params, audio, store
        self.options = options
        self.cache = cache if options.use_cache else None
        self.stop = stop or asyncio.Event()
        self.stream = RecordStream()
        self.reused = 0

    @property
    def info(self) -> ModelInfo:
        return self.endpoint.info

    def _reusable(self, old: Optional[Record], prompt: Prompt) -> bool:
        """A stored prediction counts only if the same request would be sent again."""
        return old is not None and not old.failed and (old.prompt, old.system, old.params) == (prompt.text, prompt.system, self.params)

    async def run(self) -> None:
        """Publish stored records that still hold (resume), then infer the rest."""
        loop = asyncio.get_running_loop()
        stored = {} if self.options.force_reinfer else await loop.run_in_executor(None, self.store.stored_records, self.dataset, self.info.name)
        pending: list[tuple[Sample, Prompt]] = []
        for sample in self.samples:
            prompt = self.preprocessor.prompt(sample)
            old = stored.get(sample.id)
            if old is not None:  # references and transcripts are data: score against the current ones
                old = replace(old, reference=sample.reference, transcript=sample.transcript)
            if self.options.reeval:
                self.stream.push(old or self._missing(sample, prompt))
                self.reused += old is not None
            elif self._reusable(old, prompt):
                self.stream.push(old)
                self.reused += 1
            else:
                pending.append((sample, prompt))
        if not pending:
            self.stream.close()
            return
        if self.cache is not None:
            await loop.run_in_executor(None, self.cache.load)
        writer = JsonlWriter(self.store.records_path(self.dataset, self.info.name))
        window = asyncio.Semaphore(self.info.batch_size * 2)  # bounds prepared audio held per pass
        try:
            await asyncio.gather(*(self._one(s, p, window, writer) for s, p in pending))
        finally:
            writer.close()
            self.stream.close()

    def _missing(self, sample: Sample, prompt: Prompt) -> Record:
        return Record(id=sample.id, prompt=prompt.text, system=prompt.system, params=self.params, reference=sample.reference,
                      transcript=sample.transcript, error="not inferred: no stored prediction to re-evaluate")

    async def _one(self, sample: Sample, prompt: Prompt, window: asyncio.Semaphore, writer: JsonlWriter) -> None:
        async with window:
            if self.stop.is_set():  # interrupted: leave the sample for a resumed run
                return
            record = await self.infer(sample, prompt)
        writer.write(record.to_json())
        self.stream.push(record)

    async def infer(self, sample: Sample, prompt: Prompt) -> Record:
        """The record for one sample: a prediction, or the reason there is none."""
        record = Record(id=sample.id, prompt=prompt.text, system=prompt.system, params=self.params,
                        reference=sample.reference, transcript=sample.transcript)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            audio = await self._audio(sample, prompt)
            key = self._cache_key(prompt, audio)
            cached = self.cache.get(key) if key and not self.options.force_reinfer else None
            if cached is not None:
                record.reply, record.extra = cached, {"cached": True}
            else:
                record.reply = await self._request(record, prompt, audio)
                if key:
                    self.cache.put(key, record.reply)
            record.prediction = self.postprocessor.process(record.reply)
        except AudioError as exc:
            record.error = f"audio: {exc}"
        except RequestFailed as exc:
            record.error, record.attempts, record.retry_wait = exc.reason, exc.attempts, round(exc.retry_wait, 3)
        except ReplyError as exc:
            record.error = f"bad reply: {exc}"
        record.latency = round(loop.time() - started, 4)
        return record

    def _cache_key(self, prompt: Prompt, audio: Optional[PreparedAudio]) -> Optional[str]:
        if self.cache is None or not (deterministic(self.params) or self.options.cache_sampled):
            return None
        return request_key(self.info, prompt, self.params, audio.digest if audio else None, self.language)

    async def _request(self, record: Record, prompt: Prompt, audio: Optional[PreparedAudio]) -> str:
        """Send the clip (in chunks when longer than chunk_size) and join the replies in order."""
        pieces: list[Optional[PreparedAudio]] = [audio]
        if audio is not None and self.info.chunk_size and audio.seconds > self.info.chunk_size:
            pieces = await asyncio.get_running_loop().run_in_executor(None, _encode_chunks, audio, self.info.chunk_size)
        replies = await asyncio.gather(*(self._send(prompt, piece) for piece in pieces))
        record.attempts = sum(r.attempts for r in replies)
        record.retry_wait = round(sum(r.retry_wait for r in replies), 3)
        record.chunks = len(pieces)
        texts = [self.protocol.text(r.payload).strip() for r in replies]
        return " ".join(t for t in texts if t)

    async def _audio(self, sample: Sample, prompt: Prompt) -> Optional[PreparedAudio]:
        if not prompt.with_audio:
            return None
        if not sample.has_audio:
            raise AudioError("sample has no audio")
        return await self.audio.get(sample)

    async def _send(self, prompt: Prompt, audio: Optional[PreparedAudio]):
        body, content_type = self.protocol.body(self.info, prompt, audio, self.params, self.language)
        return await self.endpoint.post(self.protocol.path, body, content_type)
