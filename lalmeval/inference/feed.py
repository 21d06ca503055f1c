"""What the passes of a run share: each dataset read once for every model, a bounded window of
prepared clips per endpoint, and the clips one model decoded for the others.

Memory then follows the in-flight windows (the sum of the endpoints' batch sizes), not the
number of models, datasets or metrics: a dataset is read by one reader however many models
answer it, a sample is held until every model has taken it, and an endpoint prepares at most
`width(batch_size)` samples at a time, whichever datasets they come from.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
from collections import Counter, OrderedDict, deque
from functools import partial
from typing import Any, Callable, Hashable, Iterator, Optional

from lalmeval.data.source import EmptySelection
from lalmeval.errors import UserError
from lalmeval.media.audio import PreparedAudio, prepare
from lalmeval.results.ledger import InvariantError
from lalmeval.results.records import Sample

READ_AHEAD = 16   # samples read per trip to the reader thread
# Samples a feed reads ahead of its slowest pass. Small on purpose: the models of a dataset then
# take each sample within moments of each other, so the clip one decoded is still there for the
# others; a model that is faster everywhere waits, which costs nothing, as the slowest one decides
# when the run ends.
FEED_AHEAD = 2 * READ_AHEAD


def width(batch_size: int) -> int:
    """Samples an endpoint prepares at once: its in-flight limit and a quarter more, so the next
    clips are ready when a slot frees, without holding many decoded clips."""
    return batch_size + max(4, batch_size // 4)


class _Signal:
    """Wakes every waiter once per `fire` (a fresh event each time, so nobody misses one)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    async def wait(self) -> None:
        await self._event.wait()

    def fire(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()


def drop_taken(buffer: list, offset: int, positions: dict[int, int], chunk: int) -> int:
    """Drop from the head of a buffer shared by readers what every reader has taken; returns the index of its new
    head. `offset` is the index of buffer[0], `positions` each reader's next index. Done `chunk` items at a time
    (deleting a list's head costs its length), or whole when every item was taken."""
    low = min(positions.values(), default=offset + len(buffer))
    taken = low - offset
    if taken >= chunk or taken == len(buffer):
        del buffer[:taken]
        return low
    return offset


def _take(samples: Iterator[Sample]) -> tuple[list[Sample], Optional[Exception]]:
    """Up to READ_AHEAD samples, and the error that ended the read after them, if one did (in a thread)."""
    batch: list[Sample] = []
    try:
        for sample in samples:
            batch.append(sample)
            if len(batch) >= READ_AHEAD:
                break
    except Exception as exc:  # noqa: BLE001 - the samples read before it are still answered
        return batch, exc
    return batch, None


class SampleFeed:
    """The selected samples of one dataset, read once in a worker thread and handed to every model's
    pass in file order. A sample is held until every pass has taken it, and reading pauses while the
    slowest pass is `window` samples behind. A source that fails mid-read ends the feed after the
    samples read before the failure, and keeps the reason in `failure`."""

    def __init__(self, samples: Callable[[], Iterator[Sample]], window: int = FEED_AHEAD):
        self._samples = samples
        self.window = max(window, READ_AHEAD)
        self.failure: Optional[str] = None
        self.empty: Optional[str] = None   # a stream that selected no sample: why (naming the filters)
        self.read = 0            # samples read from the source so far
        self.ended = False       # the source is exhausted, failed, or the run stopped reading
        self._buffer: list[Sample] = []
        self._offset = 0         # the feed index of _buffer[0]
        self._positions: dict[int, int] = {}
        self._keys = itertools.count()
        self._readers: list[FeedReader] = []
        self._taken = _Signal()
        self._task: Optional[asyncio.Task] = None

    def reader(self, repeats: int = 1) -> "FeedReader":
        """A pass's cursor over the feed; every reader sees every sample (create them all before `start`)."""
        key = next(self._keys)
        self._positions[key] = self._offset + len(self._buffer)
        self._readers.append(FeedReader(self, key, repeats))
        return self._readers[-1]

    def start(self) -> None:
        """Start reading (once; every pass of the dataset calls it)."""
        if self._task is None and not self.ended:
            self._task = asyncio.ensure_future(self._fill())

    def stop(self) -> None:
        """Read no more: the run is stopping, or no pass is left to read."""
        if self._task is not None:
            self._task.cancel()
        self._end()

    def _end(self) -> None:
        self.ended = True
        for reader in self._readers:
            reader.wake()

    def _lag(self) -> int:
        return self._offset + len(self._buffer) - min(self._positions.values(), default=self._offset + len(self._buffer))

    async def _fill(self) -> None:
        loop = asyncio.get_running_loop()
        samples = self._samples()
        try:
            while self._positions:
                while self._lag() >= self.window and self._positions:
                    await self._taken.wait()
                batch, error = await loop.run_in_executor(None, _take, samples)
                self._buffer.extend(batch)
                self.read += len(batch)
                for reader in self._readers:  # as many workers as there are new units, not every idle one
                    reader.wake(len(batch) * reader.repeats)
                if error is not None:
                    raise error
                if not batch:
                    break
        except asyncio.CancelledError:
            raise
        except EmptySelection as exc:  # read to its end, nothing kept: not broken, but nothing to evaluate
            self.empty = str(exc)
        except (UserError, InvariantError) as exc:  # bad data met while reading: its own one-line message
            self.failure = str(exc)
        except Exception as exc:  # noqa: BLE001 - a broken source ends the feed with its reason
            self.failure = f"{type(exc).__name__}: {exc}"
        finally:
            self._end()

    def _next(self, key: int) -> Optional[Sample]:
        at = self._positions[key] - self._offset
        if at >= len(self._buffer):
            return None
        sample = self._buffer[at]
        self._positions[key] += 1
        self._trim()
        return sample

    def _trim(self) -> None:
        self._offset = drop_taken(self._buffer, self._offset, self._positions, 64)
        self._taken.fire()

    def _drop(self, key: int) -> None:
        if self._positions.pop(key, None) is None:
            return
        self._trim()
        if not self._positions:  # nobody is left to read what would be read next
            self.stop()


class FeedReader:
    """One pass's cursor over a SampleFeed: (sample, repeat) units, each sample `repeats` times.

    `admit` (the pass's ledger) learns each sample as it is taken; a sample it refuses (an id seen
    twice in a stream) ends this reader with the reason in `failure`."""

    def __init__(self, feed: SampleFeed, key: int, repeats: int):
        self.feed, self._key, self.repeats = feed, key, repeats
        self.admit: Callable[[str], None] = lambda _: None
        self.failure: Optional[str] = None
        self._units: list[tuple[Sample, int]] = []
        self._ended = False
        # Workers waiting for a unit, first come first woken. Waking every idle worker of every model on each
        # read (a hundred tasks to hand out sixteen samples) cost the event loop more than the hand-out itself.
        self._waiting: deque[asyncio.Future] = deque()

    async def get(self) -> Optional[tuple[Sample, int]]:
        """The next (sample, repeat) to answer, or None when there is none left."""
        while not self._ended:
            if self._units:
                return self._units.pop()
            sample = self.feed._next(self._key) if self._key in self.feed._positions else None
            if sample is not None:
                try:
                    self.admit(sample.id)
                except InvariantError as exc:
                    self.failure = str(exc)
                    self.close()
                    return None
                self._units = [(sample, r) for r in reversed(range(self.repeats))]
                continue
            if self.feed.ended:
                return None
            await self._wait()
        return None

    async def _wait(self) -> None:
        """Until `wake` picks this worker. A worker cancelled after it was picked hands its turn on: the unit it
        was woken for must not wait for the next read."""
        turn = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.wake(1)
            raise

    def wake(self, count: Optional[int] = None) -> None:
        """Wake `count` waiting workers (every one when None): as many as there are new units, or all at the end.
        A woken worker that finds its unit taken by a busy one waits again; none waits while a unit is left."""
        while self._waiting and (count is None or count > 0):
            turn = self._waiting.popleft()
            if not turn.done():  # a cancelled waiter left its future behind
                turn.set_result(None)
                count = None if count is None else count - 1

    def end(self) -> None:
        """Hand out nothing more (the run is stopping); workers waiting for a sample see the end."""
        self._ended = True
        self.wake()

    def close(self) -> None:
        """This pass reads no more: the feed no longer keeps samples for it."""
        self._ended = True
        self.feed._drop(self._key)
        self.wake()


class _Preparation:
    """One clip's decoding: queued with the urgency of the most urgent pass that asked for it."""

    __slots__ = ("call", "urgency", "future", "started", "waiters")

    def __init__(self, call: Callable[[], PreparedAudio], urgency: float):
        self.call, self.urgency, self.started, self.waiters = call, urgency, False, 0
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()


class AudioCache:
    """Prepared clips shared by the models of a run. A clip one model prepared (decoded, encoded) is
    kept until every model expected to ask for it has (then dropped at once), or until `capacity`
    newer clips push it out (a model that never asks: its record was stored, its request failed).
    With one model nothing is kept. A clip that cannot be decoded fails the same way for every model.

    At most `workers` clips are prepared at once, off the loop; the others wait their turn, the most urgent
    first (a clip takes the urgency of the most urgent pass that asked for it, then first asked first served).
    The passes of the model with the fewest slots are the most urgent: that model sets the run's length, and
    at the start every model asks for clips at once. Nor do the data readers, which share the loop's threads,
    wait behind a queue of every clip asked for."""

    def __init__(self, capacity: int, max_seconds: Optional[float] = None, workers: Optional[int] = None):
        self.capacity = capacity
        self.max_seconds = max_seconds
        self.workers = workers or min(32, (os.cpu_count() or 1) + 4)   # as many as the loop's default threads
        self._expected: Counter[Hashable] = Counter()
        self._items: OrderedDict[tuple, list[Any]] = OrderedDict()   # key -> [preparation, times served]
        self._queue: list[tuple[float, int, _Preparation]] = []
        self._order = itertools.count()
        self._running = 0

    def __len__(self) -> int:
        """Clips kept for models that have not asked for them yet."""
        return len(self._items)

    def expect(self, group: Hashable) -> None:
        """One more reader will ask for the clips of `group` (a dataset and how its clips are cut)."""
        self._expected[group] += 1

    async def get(self, group: Hashable, sample: Sample, index: int, first_seconds: Optional[float] = None,
                  urgency: float = 0.0) -> PreparedAudio:
        """Clip `index` of `sample`, decoded (at most `first_seconds` of it) and encoded off the loop; the lower
        `urgency`, the sooner."""
        ref = sample.audio[index]
        key = (group, sample.id, index)
        entry = self._items.get(key)
        if entry is None:
            entry = [_Preparation(lambda: prepare(ref.source, ref.span, self.max_seconds, first_seconds), urgency), 0]
            self._queued(entry[0])
            if self.capacity and self._expected[group] > 1:
                self._items[key] = entry
                while len(self._items) > self.capacity:
                    self._items.popitem(last=False)
        elif not entry[0].started and urgency < entry[0].urgency:
            entry[0].urgency = urgency   # queued again, sooner; the later copy is skipped once it has run
            heapq.heappush(self._queue, (urgency, next(self._order), entry[0]))
        entry[1] += 1
        if entry[1] >= self._expected[group]:
            self._items.pop(key, None)
        job = entry[0]
        job.waiters += 1
        try:
            return await asyncio.shield(job.future)   # one waiter cancelled does not cancel the clip for the others
        finally:
            job.waiters -= 1
            if not job.waiters and not job.started and not job.future.done():
                job.future.cancel()   # queued and wanted by nobody now: dropped (a later ask queues it anew)
                if self._items.get(key) is entry:
                    del self._items[key]

    def _queued(self, job: _Preparation) -> None:
        heapq.heappush(self._queue, (job.urgency, next(self._order), job))
        self._next()

    def _next(self) -> None:
        """Start queued preparations while fewer than `workers` run; one that every waiter gave up is skipped."""
        while self._running < self.workers and self._queue:
            job = heapq.heappop(self._queue)[2]
            if job.started or job.future.done():
                continue
            job.started = True
            try:
                running = asyncio.get_running_loop().run_in_executor(None, job.call)
            except Exception as exc:   # the executor was shut down: every waiter hears why
                job.future.set_exception(exc)
                job.future.exception()   # logged by nobody when no waiter is left
                continue
            self._running += 1
            running.add_done_callback(partial(self._ran, job))

    def _ran(self, job: _Preparation, done: asyncio.Future) -> None:
        self._running -= 1
        error = None if done.cancelled() else done.exception()   # retrieved even when nobody waits any more
        if not job.future.done():
            if done.cancelled():
                job.future.cancel()
            elif error is not None:
                job.future.set_exception(error)
                job.future.exception()   # its waiters raise it; with none left (all cancelled) nothing is logged
            else:
                job.future.set_result(done.result())
        self._next()
