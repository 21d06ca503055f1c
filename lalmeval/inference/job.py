"""One inference pass of a dataset on a model, shared by every Engine of that dataset."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any, AsyncIterator, Optional

from lalmeval.config import ModelInfo
from lalmeval.data.audio import AudioError, PreparedAudio, prepare
from lalmeval.inference.client import Endpoint, RequestFailed
from lalmeval.inference.protocols import Protocol, ReplyError
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
            source = sample.audio_bytes if sample.audio_bytes is not None else sample.audio_path
            future = asyncio.get_running_loop().run_in_executor(None, prepare, source)
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
        audio: AudioCache, store: RunStore,
    ):
        self.dataset, self.language, self.samples = dataset, language, samples
        self.endpoint, self.protocol = endpoint, protocol
        self.preprocessor, self.postprocessor = preprocessor, postprocessor
        self.params, self.audio, self.store = params, audio, store
        self.stream = RecordStream()
        self.reused = 0

    @property
    def info(self) -> ModelInfo:
        return self.endpoint.info

    async def run(self) -> None:
        """Publish stored records first (resume), then infer the rest."""
        done = self.store.finished_records(self.dataset, self.info.name)
        wanted = {s.id for s in self.samples}
        for sample in self.samples:
            if sample.id in done:
                self.stream.push(done[sample.id])
        self.reused = len(wanted & done.keys())
        writer = JsonlWriter(self.store.records_path(self.dataset, self.info.name))
        window = asyncio.Semaphore(self.info.batch_size * 2)  # bounds prepared audio held per pass
        try:
            await asyncio.gather(*(self._one(s, window, writer) for s in self.samples if s.id not in done))
        finally:
            writer.close()
            self.stream.close()

    async def _one(self, sample: Sample, window: asyncio.Semaphore, writer: JsonlWriter) -> None:
        async with window:
            record = await self.infer(sample)
        writer.write(record.to_json())
        self.stream.push(record)

    async def infer(self, sample: Sample) -> Record:
        """The record for one sample: a prediction, or the reason there is none."""
        prompt = self.preprocessor.prompt(sample)
        record = Record(id=sample.id, prompt=prompt.text, system=prompt.system, params=self.params, reference=sample.reference)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            pieces = await self._audio_pieces(sample, prompt)
            replies = await asyncio.gather(*(self._send(prompt, piece) for piece in pieces))
            record.attempts = sum(r.attempts for r in replies)
            texts = [self.protocol.text(r.payload).strip() for r in replies]
            record.reply = " ".join(t for t in texts if t)
            record.prediction = self.postprocessor.process(record.reply)
            record.chunks = len(pieces)
        except AudioError as exc:
            record.error = f"audio: {exc}"
        except RequestFailed as exc:
            record.error, record.attempts = exc.reason, exc.attempts
        except ReplyError as exc:
            record.error = f"bad reply: {exc}"
        record.latency = round(loop.time() - started, 4)
        return record

    async def _audio_pieces(self, sample: Sample, prompt: Prompt) -> list[Optional[PreparedAudio]]:
        if not prompt.with_audio:
            return [None]
        if not sample.has_audio:
            raise AudioError("sample has no audio")
        audio = await self.audio.get(sample)
        if self.info.chunk_size and audio.seconds > self.info.chunk_size:
            return await asyncio.get_running_loop().run_in_executor(None, _encode_chunks, audio, self.info.chunk_size)
        return [audio]

    async def _send(self, prompt: Prompt, audio: Optional[PreparedAudio]):
        body, content_type = self.protocol.body(self.info, prompt, audio, self.params, self.language)
        return await self.endpoint.post(self.protocol.path, body, content_type)
