"""One inference pass of a dataset on a model, shared by every Engine of that dataset."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import replace
from typing import Any, AsyncIterator, Optional

from lalmeval.cache import InferenceCache, deterministic, request_key
from lalmeval.config import ModelInfo
from lalmeval.data.audio import AudioError, PreparedAudio, prepare, source_digest
from lalmeval.inference.client import Endpoint, RequestFailed
from lalmeval.inference.protocols import Answer, Protocol, ReplyError
from lalmeval.ledger import INTERRUPTED, Ledger
from lalmeval.options import RunOptions
from lalmeval.postprocess.base import Postprocessor
from lalmeval.preprocess.base import Preprocessor
from lalmeval.records import Prompt, Record, Sample
from lalmeval.store import JsonlWriter, RunStore, WriteFailed

NOT_INFERRED = "not inferred: no stored prediction to re-evaluate"


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


def _internal(exc: BaseException) -> str:
    return f"internal error: {type(exc).__name__}: {exc}"


class InferenceJob:
    """Runs every pending sample of a dataset through one endpoint and publishes one record per sample."""

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
        self.failure: Optional[str] = None   # why the pass as a whole could not go on, if it could not
        self._writer: Optional[JsonlWriter] = None

    @property
    def info(self) -> ModelInfo:
        return self.endpoint.info

    def _blank(self, sample_id: str) -> Record:
        """The record of a sample that gets no prediction (its reason is set by the caller)."""
        sample = self._by_id.get(sample_id)
        return Record(id=sample_id, prompt="", system=None, params=self.params,
                      reference=sample.reference if sample else None, transcript=sample.transcript if sample else None)

    def _persist(self, record: Record) -> None:
        if self._writer is None:
            return
        try:
            self._writer.write(record.to_json())
        except WriteFailed:
            self.stop.set()  # the disk refused a write: stop; the record stays unwritten and a resume requests it

    async def run(self) -> None:
        """Publish stored records that still hold (resume), infer the rest; every sample ends as one record."""
        self._by_id = {s.id: s for s in self.samples}
        ledger = Ledger(self._by_id, self.stream.push, self._persist, self._blank)
        loop = asyncio.get_running_loop()
        try:
            stored = {} if self.options.force_reinfer else await loop.run_in_executor(None, self.store.stored_records, self.dataset, self.info.name)
            if self.options.reeval:
                self._republish(stored, ledger)
                return
            self._writer = JsonlWriter(self.store.records_path(self.dataset, self.info.name))
            if self.cache is not None:
                await loop.run_in_executor(None, self.cache.load)
            await self._work(stored, ledger)
        except WriteFailed as exc:
            self.failure = str(exc)
            self.stop.set()
        except Exception as exc:  # a pass that cannot go on fails its remaining samples with the reason
            self.failure = _internal(exc)
            ledger.fail_open(f"pass failed: {self.failure}", persist=True)
        finally:
            leftover = INTERRUPTED if self.stop.is_set() else "internal error: the pass ended without a record for this sample"
            ledger.fail_open(leftover, persist=False)
            if self._writer is not None:
                self._writer.close()
            self.stream.close()

    def _republish(self, stored: dict[str, Record], ledger: Ledger) -> None:
        """--reeval: every sample's stored record, or a 'not inferred' failure; nothing is sent."""
        for sample in self.samples:
            old = stored.get(sample.id)
            if old is None:
                record = self._blank(sample.id)
                record.error = NOT_INFERRED
            else:
                record = replace(old, reference=sample.reference, transcript=sample.transcript)
                self.reused += 1
            ledger.settle(record, persist=False)

    async def _work(self, stored: dict[str, Record], ledger: Ledger) -> None:
        """A fixed pool of workers pulls the samples: memory stays bounded however large the dataset."""
        pending = iter(self.samples)

        async def worker() -> None:
            for sample in pending:  # one shared iterator: each sample goes to exactly one worker
                if self.stop.is_set():
                    return  # interrupted: the sample stays open and is left for a resumed run
                record, persist = await self._resolve(sample, stored.get(sample.id))
                ledger.settle(record, persist)

        workers = [asyncio.ensure_future(worker()) for _ in range(self.info.batch_size * 2)]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise

    async def _resolve(self, sample: Sample, old: Optional[Record]) -> tuple[Record, bool]:
        """The record of one sample, and whether to write it: a reused one is already on disk."""
        try:
            prompt = self.preprocessor.prompt(sample)
            if old is not None and not old.failed and old.key is not None:
                if old.key == await self._identity(sample, prompt):
                    self.reused += 1
                    # references and transcripts are data: score against the current ones
                    return replace(old, reference=sample.reference, transcript=sample.transcript), False
            return await self.infer(sample, prompt), True
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a bug or an input nobody foresaw fails this sample only
            record = self._blank(sample.id)
            record.error = _internal(exc)
            return record, True

    async def _identity(self, sample: Sample, prompt: Prompt) -> Optional[str]:
        """The request key of a sample without decoding its audio (for deciding whether to resume it)."""
        digest = None
        if prompt.with_audio and sample.has_audio:
            try:
                digest = await asyncio.get_running_loop().run_in_executor(None, source_digest, sample.audio_source)
            except AudioError:
                return None
        return request_key(self.info, prompt, self.params, digest, self.language)

    async def infer(self, sample: Sample, prompt: Prompt) -> Record:
        """The record for one sample: a prediction, or the reason there is none."""
        record = Record(id=sample.id, prompt=prompt.text, system=prompt.system, params=self.params,
                        reference=sample.reference, transcript=sample.transcript)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            audio = await self._audio(sample, prompt)
            record.key = request_key(self.info, prompt, self.params, audio.digest if audio else None, self.language)
            cached = self.cache.get(record.key) if self._cacheable() else None
            if cached is not None:
                record.reply, record.extra = cached, {"cached": True}
            else:
                record.reply = await self._request(record, prompt, audio)
                if self._cacheable():
                    self.cache.put(record.key, record.reply)
            record.prediction = self.postprocessor.process(record.reply)
        except AudioError as exc:
            record.error = f"audio: {exc}"
        except RequestFailed as exc:
            record.error, record.attempts, record.retry_wait = exc.reason, exc.attempts, round(exc.retry_wait, 3)
        except ReplyError as exc:
            record.error = f"bad reply: {exc}"
        record.latency = round(loop.time() - started, 4)
        return record

    def _cacheable(self) -> bool:
        return self.cache is not None and not self.options.force_reinfer and (deterministic(self.params) or self.options.cache_sampled)

    async def _request(self, record: Record, prompt: Prompt, audio: Optional[PreparedAudio]) -> str:
        """Send the clip (in chunks when longer than chunk_size) and join the replies in order."""
        pieces: list[Optional[PreparedAudio]] = [audio]
        if audio is not None and self.info.chunk_size and audio.seconds > self.info.chunk_size:
            pieces = await asyncio.get_running_loop().run_in_executor(None, _encode_chunks, audio, self.info.chunk_size)
        replies = await asyncio.gather(*(self._send(prompt, piece) for piece in pieces))
        record.attempts = sum(r.attempts for r in replies)
        record.retry_wait = round(sum(r.retry_wait for r in replies), 3)
        record.chunks = len(pieces)
        record.usage = _sum_usage([r.value for r in replies])
        texts = [r.value.text.strip() for r in replies]
        return " ".join(t for t in texts if t)

    async def _audio(self, sample: Sample, prompt: Prompt) -> Optional[PreparedAudio]:
        if not prompt.with_audio:
            return None
        if not sample.has_audio:
            raise AudioError("sample has no audio")
        return await self.audio.get(sample)

    async def _send(self, prompt: Prompt, audio: Optional[PreparedAudio]):
        body, content_type = self.protocol.body(self.info, prompt, audio, self.params, self.language)
        return await self.endpoint.post(self.protocol.path, body, content_type, self.protocol.parse)


def _sum_usage(answers: list[Answer]) -> Optional[dict[str, int]]:
    totals: dict[str, int] = {}
    for answer in answers:
        for name, count in (answer.usage or {}).items():
            totals[name] = totals.get(name, 0) + count
    return totals or None
