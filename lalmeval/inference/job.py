"""One inference pass of a dataset on a model (a replica group), shared by every Engine of that dataset."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from dataclasses import replace
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

from lalmeval.background import abandonable
from lalmeval.results.cache import EARLIER_RUN, InferenceCache, deterministic, request_key
from lalmeval.config.schema import ModelInfo
from lalmeval.data.choices import LETTERS
from lalmeval.results.clips import LATER, notes as clip_notes
from lalmeval.media.audio import AudioError, PreparedAudio, audio_identity, identity_digest
from lalmeval.media.images import ImageError, ImagePart
from lalmeval.data.messages import Conversation, Text, Turn, image_parts
from lalmeval.data.source import Source
from lalmeval.errors import UserError
from lalmeval.inference.client import Endpoint, Reply, RequestFailed
from lalmeval.inference.feed import AudioCache, FeedReader, SampleFeed, drop_taken, width
from lalmeval.inference.protocols import Answer, Protocol, ReplyError, RequestError
from lalmeval.results.ledger import INTERRUPTED, Ledger
from lalmeval.config.options import RunOptions
from lalmeval.postprocess.base import Postprocessor
from lalmeval.preprocess.base import Preprocessor
from lalmeval.results.records import Prompt, Record, Sample, failure_kind
from lalmeval.config.secrets import NO_SECRETS, Redactor, redacted_params, scrub
from lalmeval.results.spoken import SpokenError, keep
from lalmeval.results.store import JsonlWriter, RunStore, WriteFailed

NOT_INFERRED = "not inferred: no stored prediction to re-evaluate"
STREAM_LAG = 4096  # records the slowest reader may fall behind before inference waits for it


class RecordStream:
    """Records in completion order, replayed in batches to each subscribed reader as they arrive.

    A record is held only until every reader has taken it, so memory follows the readers' lag,
    not the dataset. Counts (and failure kinds with one example reason each) are kept for all."""

    def __init__(self) -> None:
        self.count = 0
        self.failed = 0
        self.failure_kinds: Counter[str] = Counter()
        self.failure_examples: dict[str, str] = {}
        self.cached: Counter[str] = Counter()   # answers from the inference cache, by the run that asked first
        self.listeners: list[Callable[[Record], None]] = []   # told of every record (the run's failure-rate watch)
        self.closed = False
        self._buffer: list[Record] = []
        self._offset = 0                       # the stream index of _buffer[0]
        self._positions: dict[int, int] = {}   # reader -> the stream index it reads next
        self._readers = itertools.count()
        self._event = asyncio.Event()
        self._taken = asyncio.Event()
        self._naps: set[asyncio.Future] = set()   # readers lingering for a fuller batch (see batches)

    def subscribe(self) -> int:
        """A reader that will see every record pushed from now on (subscribe before the pass starts)."""
        reader = next(self._readers)
        self._positions[reader] = self._offset + len(self._buffer)
        return reader

    def push(self, record: Record) -> None:
        self.count += 1
        if record.failed:
            self.failed += 1
            kind = failure_kind(record.error or "")
            self.failure_kinds[kind] += 1
            self.failure_examples.setdefault(kind, record.error or "")
        elif record.extra.get("cached"):
            self.cached[record.extra.get("cached_from") or EARLIER_RUN] += 1
        for listener in self.listeners:
            listener(record)
        if self._positions:
            self._buffer.append(record)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()
        for nap in self._naps:  # a batch waiting for more records goes now: no more will come
            if not nap.done():
                nap.set_result(None)

    async def _linger(self, seconds: float) -> None:
        """Wait `seconds`, or until the pass ends."""
        loop = asyncio.get_running_loop()
        nap = loop.create_future()
        timer = loop.call_later(seconds, lambda: nap.done() or nap.set_result(None))
        self._naps.add(nap)
        try:
            await nap
        finally:
            timer.cancel()
            self._naps.discard(nap)

    def _wake(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    def _trim(self) -> None:
        self._offset = drop_taken(self._buffer, self._offset, self._positions, 256)

    def lag(self) -> int:
        """Records pushed that the slowest reader has not taken yet."""
        return self._offset + len(self._buffer) - min(self._positions.values(), default=self._offset + len(self._buffer))

    async def room(self, stop: asyncio.Event, limit: int = STREAM_LAG) -> None:
        """Wait while the slowest reader is `limit` records behind (or until `stop`): memory stays bounded."""
        while self.lag() >= limit and not stop.is_set():
            taken, stopped = asyncio.ensure_future(self._taken.wait()), asyncio.ensure_future(stop.wait())
            await asyncio.wait((taken, stopped), return_when=asyncio.FIRST_COMPLETED)
            taken.cancel()
            stopped.cancel()

    def _took(self) -> None:
        event, self._taken = self._taken, asyncio.Event()
        event.set()

    async def batches(self, reader: int, max_size: int = 256, linger: float = 0.0) -> AsyncIterator[list[Record]]:
        """Yield every record once to `reader`, in batches of what has arrived, until the pass ends. With `linger`,
        a batch waits that many seconds after its first record for more (not past max_size or the end of the pass)."""
        try:
            while True:
                start = self._positions[reader] - self._offset
                if start < len(self._buffer):
                    if linger and not self.closed and len(self._buffer) - start < max_size:
                        await self._linger(linger)
                        start = self._positions[reader] - self._offset   # another reader may have trimmed meanwhile
                    batch = self._buffer[start : start + max_size]
                    self._positions[reader] += len(batch)
                    self._trim()
                    self._took()
                    yield batch
                elif self.closed:
                    return
                else:
                    await self._event.wait()
        finally:
            del self._positions[reader]  # a reader that stops early must not pin the records
            self._trim()
            self._took()


class _PassFailed(Exception):
    """The pass cannot go on; the message is the reason every open sample fails with."""


def _internal(exc: BaseException) -> str:
    return f"internal error: {type(exc).__name__}: {exc}"


# Reasons that say a replica, not the request, was the problem: another replica may answer. A broken server
# (5xx, malformed or wrong-shaped replies after its retries) or one refusing what its siblings take (a key or
# path it lacks) is such a replica; a 400, 413 or an oversized reply is about the request itself.
_REPLICA_TROUBLE = ("endpoint down", "endpoint refused", "connection error", "timeout", "malformed JSON reply", "bad reply", "HTTP 5",
                    *(f"HTTP {status}:" for status in (401, 403, 404, 408, 409, 422, 425, 429)))


class InferenceJob:
    """Runs every selected sample of a dataset through one replica group; publishes one record per sample."""

    def __init__(
        self, dataset: str, language: str, source: Source, name: str, endpoints: list[Endpoint], protocol: Protocol,
        preprocessor: Preprocessor, postprocessor: Postprocessor, params: dict[str, Any],
        audio: AudioCache, store: RunStore, options: RunOptions = RunOptions(),
        cache: Optional[InferenceCache] = None, stop: Optional[asyncio.Event] = None, identity: Optional[str] = None,
        repeats: int = 1, long_audio: str = "chunk", redactor: Redactor = NO_SECRETS,
        feed: Optional[SampleFeed] = None, windows: Optional[dict[Endpoint, asyncio.Semaphore]] = None,
    ):
        self.dataset, self.language, self.source, self.name = dataset, language, source, name
        self.endpoints, self.protocol = endpoints, protocol
        self.preprocessor, self.postprocessor = preprocessor, postprocessor
        self.params, self.audio, self.store, self.options = params, audio, store, options
        # What records store and request keys cover: a key passed in extra_body or the URL is neither
        # written nor part of a request's identity (a new token leaves stored answers valid).
        self.shown_params = redacted_params(params, redactor)
        self.redact = redactor
        self.cache = cache if options.use_cache else None
        self.stop = stop or asyncio.Event()
        self.identity = redactor(identity or endpoints[0].info.url)
        self.repeats = repeats
        self.long_audio = long_audio   # how audio longer than chunk_size is sent: chunk, truncate or vad
        # Truncation needs only the clip's start: decode no more than that.
        self.first_seconds = endpoints[0].info.chunk_size if long_audio == "truncate" else None
        self.audio_group = (dataset, self.first_seconds)
        audio.expect(self.audio_group)
        # The dataset is read once for every model (the feed), and each endpoint prepares at most
        # width(batch_size) samples at a time across every dataset (the windows), so memory follows
        # the in-flight windows, not the number of models and datasets.
        self.feed = feed or SampleFeed(source.samples)
        self.reader: FeedReader = self.feed.reader(repeats)
        windows = windows if windows is not None else {}
        self.windows = {e: windows.get(e) or asyncio.Semaphore(width(e.info.batch_size)) for e in endpoints}
        # Every model answers every sample, so the one with the fewest slots has the most to do per slot: its clips
        # are prepared first (a lower urgency is sooner).
        self.urgency = float(sum(e.info.batch_size for e in endpoints))
        self.stream = RecordStream()
        self.reused = 0
        self.failure: Optional[str] = None   # why the pass as a whole could not go on, if it could not
        self.broken_off: Optional[str] = None  # the data could not be read to its end: why, and after how many rows
        self.empty: Optional[str] = None       # a streamed dataset whose filters kept no sample: why
        self.before_request: Optional[Callable[[], Awaitable[None]]] = None  # e.g. start a server not launched up front
        self.started: Optional[float] = None
        self._writer: Optional[JsonlWriter] = None
        self._stored: dict[tuple[str, int], Record] = {}

    @property
    def info(self) -> ModelInfo:
        """The settings every replica of the group shares."""
        return self.endpoints[0].info

    @property
    def total(self) -> Optional[int]:
        total = self.source.total
        return total * self.repeats if total is not None else None

    def _blank(self, unit: tuple[str, int], sample: Optional[Sample] = None, reason: Optional[str] = None) -> Record:
        """The record of a unit that gets no prediction."""
        return Record(id=unit[0], repeat=unit[1], prompt="", system=None, params=self.shown_params, error=reason,
                      reference=sample.reference if sample else None, transcript=sample.transcript if sample else None,
                      subset=sample.subset if sample else None)

    def _persist(self, record: Record) -> None:
        if self._writer is None:
            return
        line = record.to_json()
        if self.redact:  # whatever a record holds (a prompt built from the config included) is scrubbed
            line = {**scrub(line, self.redact, keys=False), "key": record.key}   # a digest is no secret's spelling
        try:
            self._writer.write(line)
        except WriteFailed:
            self.stop.set()  # the disk refused a write: stop; the record stays unwritten and a resume requests it

    async def prepare(self) -> None:
        """Read the stored records (resume) and the cache, before anything is launched (off the loop; Ctrl-C does not wait for it)."""
        try:
            if not self.options.force_reinfer:
                self._stored = await abandonable(self.store.stored_records, self.dataset, self.name)
            if self.cache is not None and not self.options.reeval:
                await abandonable(self.cache.load)
        except Exception as exc:  # noqa: BLE001 - run() fails the pass's samples with this reason
            self.failure = _internal(exc)

    @property
    def needs_requests(self) -> bool:
        """Whether some selected sample has no stored prediction (so its server must be up)."""
        if self.options.reeval or self.failure is not None:
            return False
        ids = self.source.ids
        return ids is None or any((r := self._stored.get((i, k))) is None or r.failed for i in ids for k in range(self.repeats))

    async def run(self) -> None:
        """Publish stored records that still hold (resume), infer the rest; every sample ends as one record."""
        ledger = Ledger(self.source.ids, self.stream.push, self._persist, self._blank, self.repeats)
        self.started = time.monotonic()
        try:
            if not self.options.reeval:
                self._writer = JsonlWriter(self.store.records_path(self.dataset, self.name))
            if self.failure is not None:  # prepare() could not read what the pass needs
                raise _PassFailed(self.failure)
            await self._work(self._stored, ledger)
        except WriteFailed as exc:
            self.failure = str(exc)
            self.stop.set()
        except _PassFailed as exc:
            ledger.fail_open(f"pass failed: {exc}", persist=True)
        except Exception as exc:  # a pass that cannot go on fails its remaining samples with the reason
            self.failure = _internal(exc)
            ledger.fail_open(f"pass failed: {self.failure}", persist=True)
        finally:
            self.reader.close()  # a pass that never read (it failed first) must not hold the feed back
            leftover = INTERRUPTED if self.stop.is_set() else "internal error: the pass ended without a record for this sample"
            ledger.fail_open(leftover, persist=False)
            if self._writer is not None:
                self._writer.close()
            self.stream.close()

    async def _work(self, stored: dict[str, Record], ledger: Ledger) -> None:
        """Workers of every replica take from the dataset's one feed: memory stays bounded however large the dataset."""
        reader = self.reader
        reader.admit = ledger.admit
        self.feed.start()
        stopper = asyncio.ensure_future(self._stop_reading(reader))
        workers = []
        for endpoint in self.endpoints:
            # As many workers as the endpoint prepares at once: a dataset alone can keep it busy.
            count = 1 if self.options.reeval else width(endpoint.info.batch_size)
            workers += [asyncio.ensure_future(self._worker(reader, endpoint, stored, ledger)) for _ in range(count)]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:  # the workers are done: the feed keeps nothing more for this pass
            reader.close()
            stopper.cancel()
            await asyncio.gather(stopper, return_exceptions=True)
        # The data broke off: what it still owed cannot be read. (A stopped run leaves its open samples
        # interrupted instead, for a resume to request; the break shows again then.)
        self.empty = self.feed.empty
        failure = reader.failure or self.feed.failure
        if failure is not None and not self.stop.is_set():
            self.failure = f"data: {failure}"
            self.broken_off = f"the data broke off after {self.feed.read} row(s): {failure}"
            ledger.fail_open(self.failure, persist=True)

    async def _stop_reading(self, reader: FeedReader) -> None:
        """Once the run stops nothing new is taken: end the read-ahead and wake the idle workers, so the
        pass ends with its last request in flight, not at the end of the grace period."""
        await self.stop.wait()
        self.feed.stop()
        reader.end()

    async def _worker(self, reader: FeedReader, home: Endpoint, stored: dict[tuple[str, int], Record], ledger: Ledger) -> None:
        while not self.stop.is_set():
            await self.stream.room(self.stop)
            unit = await reader.get()
            if unit is None or self.stop.is_set():
                return  # interrupted: a taken unit stays open and is left for a resumed run
            sample, repeat = unit
            record, persist = await self._resolve(sample, repeat, stored.pop((sample.id, repeat), None), home)
            ledger.settle(record, persist)

    async def _resolve(self, sample: Sample, repeat: int, old: Optional[Record], home: Endpoint) -> tuple[Record, bool]:
        """The record of one (sample, repeat), and whether to write it: a reused one is already on disk."""
        try:
            if self.options.reeval:  # score what is stored; send nothing
                if old is None:
                    return self._blank((sample.id, repeat), sample, NOT_INFERRED), False
                self.reused += 1
                return self._refreshed(old, sample), False
            if sample.problem:
                return self._blank((sample.id, repeat), sample, sample.problem), True
            prompt = self.preprocessor.prompt(sample, repeat)
            if old is not None and not old.failed and old.key is not None and old.key == await self._identity(sample, prompt, repeat):
                self.reused += 1
                return self._refreshed(old, sample), False
            if all(e.down_reason is not None for e in self.endpoints):
                # Every replica is down or refusing: the pass's remaining samples fail at once, none is sent or decoded.
                record = self._record(sample, prompt, repeat)
                record.error = self.endpoints[0].unavailable()
                return record, True
            if self.before_request is not None:
                try:
                    await self.before_request()
                except UserError as exc:
                    return self._blank((sample.id, repeat), sample, f"launch failed: {exc}"), True
            async with self.windows[home]:  # the clips and bodies an endpoint prepares, whichever pass they come from
                record = await self.infer(sample, prompt, home, repeat)
            return record, record.error != INTERRUPTED  # not sent: not written, so a resume requests it
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a bug or an input nobody foresaw fails this sample only
            return self._blank((sample.id, repeat), sample, _internal(exc)), True

    @staticmethod
    def _refreshed(old: Record, sample: Sample) -> Record:
        """A stored record scored against the current data (references, gold answers, transcripts and
        subsets are data). A multiple-choice gold is found by its text among the options the model saw."""
        options = old.extra.get("options")
        if not (sample.choices and options):
            return replace(old, transcript=sample.transcript, subset=sample.subset, reference=sample.reference)
        known = sample.gold is not None and 0 <= sample.gold < len(sample.choices)
        order = old.extra.get("permutation") or list(range(len(options)))
        if known and sorted(order) == list(range(len(sample.choices))) and [sample.choices[i] for i in order] == options:
            gold = order.index(sample.gold)  # the options are as they were shown: follow the permutation (texts may repeat)
        else:  # the options changed: the gold is the shown option with its text, if exactly one has it
            text = sample.choices[sample.gold] if known else None
            gold = options.index(text) if text is not None and options.count(text) == 1 else None
        return replace(old, transcript=sample.transcript, subset=sample.subset, extra={**old.extra, "gold": gold},
                       reference=f"{LETTERS[gold]}. {options[gold]}" if gold is not None else None)

    def _repeat_key(self, repeat: int) -> Optional[int]:
        return repeat if self.repeats > 1 else None

    async def _identity(self, sample: Sample, prompt: Prompt, repeat: int) -> Optional[str]:
        """The request key of a unit without decoding its audio (for deciding whether to resume it)."""
        loop = asyncio.get_running_loop()
        try:
            digests = [await loop.run_in_executor(None, audio_identity, ref.source, ref.span) for ref in sample.audio] if prompt.with_audio else []
            images = [i.digest for i in await loop.run_in_executor(None, _images, prompt)]
        except (AudioError, ValueError):
            return None
        return request_key(self.info, prompt, self.shown_params, digests, self.language, url=self.identity,
                           image_digests=images, repeat=self._repeat_key(repeat), long_audio=self.long_audio)

    def _record(self, sample: Sample, prompt: Prompt, repeat: int) -> Record:
        record = Record(id=sample.id, repeat=repeat, prompt=prompt.text, system=prompt.system, params=self.shown_params,
                        reference=sample.reference, transcript=sample.transcript, subset=sample.subset)
        if prompt.options:  # multiple choice: what the model saw, so scoring maps its answer back
            if prompt.gold is not None:
                record.reference = f"{LETTERS[prompt.gold]}. {prompt.options[prompt.gold]}"
            record.extra.update(options=list(prompt.options), gold=prompt.gold, permutation=list(prompt.permutation))
        return record

    async def infer(self, sample: Sample, prompt: Prompt, home: Endpoint, repeat: int = 0) -> Record:
        """The record for one (sample, repeat): a prediction, or the reason there is none."""
        record = self._record(sample, prompt, repeat)
        try:
            audio = await self._audio(sample, prompt)
            await self._note_clips(record, sample, audio)
            # Images are read from files: off the loop, and only when the prompt has a conversation that may hold them.
            images = await asyncio.get_running_loop().run_in_executor(None, _images, prompt) if prompt.conversation is not None else []
            record.key = request_key(self.info, prompt, self.shown_params, [a.digest for a in audio], self.language, url=self.identity,
                                     image_digests=[i.digest for i in images], repeat=self._repeat_key(repeat), long_audio=self.long_audio)
            cached = self.cache.get(record.key) if self._cacheable() else None
            if cached is not None:
                record.reply = _restore(record, cached, bool(prompt.followups))
                record.extra.update(cached=True, cached_from=self.cache.origin(record.key))
            elif prompt.followups:
                record.reply = await self._dialogue(record, prompt, audio, home, images)
                if self._cacheable():  # a dialogue is cached whole: every turn's reply
                    self.cache.put(record.key, json.dumps(record.extra["turns"], ensure_ascii=False))
            else:
                record.reply = await self._request(record, prompt, audio, home, images)
                if self._cacheable():
                    self.cache.put(record.key, record.reply)
            record.prediction = self.postprocessor.process(record.reply)
        except ImageError as exc:
            record.error = f"image: {exc}"
        except AudioError as exc:
            record.error = f"audio: {exc}"
            await self._note_clips(record, sample, [])
        except RequestError as exc:
            record.error = f"request: {exc}"
        except RequestFailed as exc:
            record.error, record.attempts, record.retry_wait = exc.reason, exc.attempts, round(exc.retry_wait, 3)
            record.latency, record.queued = round(exc.latency, 4), round(exc.queued, 4)
        except ReplyError as exc:
            record.error = f"bad reply: {exc}"
        except SpokenError as exc:
            record.error = f"spoken reply: {exc}"
        return record

    async def _note_clips(self, record: Record, sample: Sample, audio: list[PreparedAudio]) -> None:
        """Where the sample's clips came from, for the report's player. The digests of the clips prepared
        for the request are reused, and the disk (a copy to write) is left to a worker thread only when needed."""
        if not sample.audio or "audio" in record.extra:
            return
        digests = [identity_digest(a.digest) for a in audio]
        known = digests if len(digests) == len(sample.audio) and all(digests) else None
        found = clip_notes(sample, self.store.clips, known, write=False) if known is not None else LATER
        if found is LATER:
            found = await asyncio.get_running_loop().run_in_executor(None, clip_notes, sample, self.store.clips, known)
        record.extra["audio"] = found

    def _cacheable(self) -> bool:
        # A spoken reply is its audio file in this run's folder: the cache holds text only, so it is asked again.
        return self.cache is not None and not self.info.speaks and not self.options.force_reinfer and (deterministic(self.params) or self.options.cache_sampled)

    async def _audio(self, sample: Sample, prompt: Prompt) -> list[PreparedAudio]:
        if not prompt.with_audio:
            return []
        if not sample.audio:
            raise AudioError("sample has no audio")
        return [await self.audio.get(self.audio_group, sample, i, self.first_seconds, self.urgency) for i in range(len(sample.audio))]

    async def _request(self, record: Record, prompt: Prompt, audio: list[PreparedAudio], home: Endpoint, images: list[ImagePart]) -> str:
        """Send the clip (cut by long_audio when longer than chunk_size) and join the replies in order."""
        requests: list[list[PreparedAudio]] = [audio]
        if len(audio) == 1 and self.info.chunk_size and audio[0].seconds > self.info.chunk_size:
            pieces = await asyncio.get_running_loop().run_in_executor(None, _encode_chunks, audio[0], self.info.chunk_size, self.long_audio)
            requests = [[piece] for piece in pieces]
        elif len(audio) > 1:
            requests = [await self._fitted(audio)]
        if self.info.speaks and len(requests) > 1:
            raise RequestError(f"a spoken reply comes from one request, and this clip of {audio[0].seconds:.1f} s would be sent in "
                               f"{len(requests)} chunks (chunk_size {self.info.chunk_size:g} s); set long_audio: truncate, or a larger chunk_size")
        replies = await asyncio.gather(*(self._send(prompt, clips, home, images) for clips in requests))
        record.attempts = sum(r.attempts for r, _ in replies)
        record.retry_wait = round(sum(r.retry_wait for r, _ in replies), 3)
        # Chunks travel side by side: the sample waited for the slowest, not for their sum.
        record.latency, record.queued = round(max(r.latency for r, _ in replies), 4), round(max(r.queued for r, _ in replies), 4)
        record.chunks = len(requests)
        record.usage = _sum_usage([r.value for r, _ in replies])
        if len(self.endpoints) > 1:
            answered = list(dict.fromkeys(label for _, label in replies))
            record.extra["replica"] = answered[0] if len(answered) == 1 else answered
        _timings(record, replies[0][0])
        if self.info.speaks:
            await self._keep_spoken(record, replies[0][0].value)
        if self.info.inference_type == "speech":   # a text-to-speech reply has no text part: it says its input
            return prompt.text
        texts = [r.value.text.strip() for r, _ in replies]
        return " ".join(t for t in texts if t)

    async def _keep_spoken(self, record: Record, answer: Answer) -> None:
        """The reply's audio written to the run folder (off the loop), its path and duration in the record."""
        if answer.audio is None:
            raise ReplyError("the reply holds no audio, and the model entry asks for a spoken reply (modalities audio)")
        audio_format = answer.audio.format or self.info.spoken.format
        try:
            record.audio_path, record.audio_seconds = await asyncio.get_running_loop().run_in_executor(
                None, keep, self.store.root, self.dataset, self.name, record.id, record.repeat, answer.audio.data, audio_format,
                int(self.info.max_audio_mb * 1_000_000))
        except OSError as exc:
            raise SpokenError(f"cannot write it under {self.store.root / 'spoken'}: {exc.strerror or exc}") from None
        if record.audio_seconds is not None and record.latency > 0:
            record.rtf = round(record.audio_seconds / record.latency, 4)

    async def _dialogue(self, record: Record, prompt: Prompt, audio: list[PreparedAudio], home: Endpoint, images: list[ImagePart]) -> str:
        """Multi-turn: each reply goes back into the conversation before the next user turn; the last reply is the answer."""
        conversation = prompt.conversation
        audio = await self._fitted(audio)
        turns: list[dict[str, str]] = []
        replies = []
        for index in range(len(prompt.followups) + 1):
            if index:
                conversation = Conversation(conversation.system, conversation.turns + (
                    Turn("assistant", (Text(turns[-1]["reply"]),)), Turn("user", prompt.followups[index - 1])))
            reply, _ = await self._send(replace(prompt, conversation=conversation), audio, home, images)
            replies.append(reply)
            if self.info.speaks and index == len(prompt.followups):   # the answer is the last turn's: so is its audio
                await self._keep_spoken(record, reply.value)
            said = " ".join(p.text for p in conversation.turns[-1].parts if isinstance(p, Text))
            turns.append({"prompt": said, "reply": reply.value.text.strip()})
        record.attempts = sum(r.attempts for r in replies)
        record.retry_wait = round(sum(r.retry_wait for r in replies), 3)
        # Turns go one after the other: the endpoint's time is their sum.
        record.latency, record.queued = round(sum(r.latency for r in replies), 4), round(sum(r.queued for r in replies), 4)
        record.usage = _sum_usage([r.value for r in replies])
        record.extra["turns"] = turns
        return turns[-1]["reply"]

    async def _fitted(self, audio: list[PreparedAudio]) -> list[PreparedAudio]:
        """Clips that go into one request together (several clips, or a dialogue's every turn), each
        within chunk_size: truncated with `long_audio: truncate`; they cannot be split into requests."""
        limit = self.info.chunk_size
        if not limit or all(clip.seconds <= limit for clip in audio):
            return audio
        if self.long_audio != "truncate":
            longest = max(clip.seconds for clip in audio)
            raise AudioError(f"a clip of {longest:.1f} s is longer than chunk_size ({limit:g} s), and a sample with several clips or "
                             f"turns is sent in one request, so it cannot be cut into chunks (long_audio: truncate sends the first {limit:g} s)")
        loop = asyncio.get_running_loop()
        return [(await loop.run_in_executor(None, _encode_chunks, clip, limit, "truncate"))[0] for clip in audio]

    async def _send(self, prompt: Prompt, audio: list[PreparedAudio], home: Endpoint, images: list[ImagePart]):
        """POST to the home replica; when a replica is down or unreachable, the request moves to a live one."""
        body, content_type = self.protocol.body(self.info, prompt, audio, self.params, self.language, images)
        tried: list[Endpoint] = []
        endpoint: Optional[Endpoint] = home
        spent = RequestFailed("", 0)   # what the replicas tried before cost: their attempts, pauses and queueing count too
        while True:
            endpoint = endpoint if endpoint is not None and endpoint.down_reason is None else self._other(tried) or home
            try:
                reply = await endpoint.post(self.protocol.path, body, content_type, self.protocol.parse, self.protocol.reads)
                return replace(reply, attempts=reply.attempts + spent.attempts, retry_wait=reply.retry_wait + spent.retry_wait,
                               queued=reply.queued + spent.queued), endpoint.shown_url
            except RequestFailed as exc:
                tried.append(endpoint)
                exc.attempts, exc.retry_wait, exc.queued = exc.attempts + spent.attempts, exc.retry_wait + spent.retry_wait, exc.queued + spent.queued
                if not self._replica_trouble(exc.reason) or self._other(tried) is None:
                    raise
                spent = exc
                endpoint = None

    @staticmethod
    def _replica_trouble(reason: str) -> bool:
        return reason.startswith(_REPLICA_TROUBLE)

    def _other(self, tried: list[Endpoint]) -> Optional[Endpoint]:
        """The least loaded live replica not tried yet for this request."""
        live = [e for e in self.endpoints if e.down_reason is None and e not in tried]
        return min(live, key=lambda e: e.limit.in_flight / max(1, e.limit.limit), default=None)


def _restore(record: Record, cached: str, dialogue: bool) -> str:
    """The reply a cache entry holds; a dialogue's entry holds every turn, kept in the record."""
    if not dialogue:
        return cached
    record.extra["turns"] = json.loads(cached)
    return record.extra["turns"][-1]["reply"]


def _images(prompt: Prompt) -> list[ImagePart]:
    """The image parts of a prompt's conversation, read and encoded (blocking: call in an executor)."""
    return image_parts(prompt.conversation.parts()) if prompt.conversation is not None else []


def _encode_chunks(audio: PreparedAudio, seconds: Optional[float], mode: str) -> list[PreparedAudio]:
    return [piece.encoded() for piece in audio.chunks(seconds, mode)]


def _timings(record: Record, reply: Reply) -> None:
    """A streamed reply's first text and first audio, and its pace after the first token."""
    record.ttft = None if reply.first_token is None else round(reply.first_token, 4)
    record.ttfa = None if reply.first_audio is None else round(reply.first_audio, 4)
    tokens = (reply.value.usage or {}).get("completion_tokens") or reply.deltas
    if reply.first_token is not None and tokens and reply.latency > reply.first_token:
        record.tokens_per_second = round(tokens / (reply.latency - reply.first_token), 2)


def _sum_usage(answers: list[Answer]) -> Optional[dict[str, int]]:
    totals: dict[str, int] = {}
    for answer in answers:
        for name, count in (answer.usage or {}).items():
            totals[name] = totals.get(name, 0) + count
    return totals or None
