"""Requests from every connection gathered into batches for the model, behind a bounded queue.

A worker takes the oldest waiting request, waits at most `max_wait` seconds for more of the same
kind (chat or transcription) until `max_batch` are together, and runs them as one call of the
model's `generate_batch` / `transcribe_batch` in a thread or worker process, so the event loop only waits. A
request arriving when `max_queue` are already waiting is refused at once (HTTP 503 with
Retry-After) rather than queued behind minutes of work.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional, Sequence

from lalmeval.serve.errors import ApiError
from lalmeval.serve.workers import WorkerDied

Run = Callable[[int, str, list[Any]], Awaitable[list[Any]]]   # (worker, kind, items) -> one result per item
Ready = Callable[[int], Awaitable[None]]                     # returns when that worker can take a batch


class Busy(ApiError):
    """HTTP 503: the queue is full; Retry-After says when a slot is likely free."""

    def __init__(self, waiting: int, retry_after: int):
        super().__init__(503, f"server busy: {waiting} requests are waiting; retry after {retry_after}s", headers={"Retry-After": str(retry_after)})


@dataclass(eq=False)   # a job is itself: comparing two would compare their items (numpy arrays have no truth value)
class _Job:
    kind: str
    item: Any
    future: asyncio.Future
    alone: bool = False   # its batch's worker died: it runs in a batch of its own, so only the request that killed a worker fails


class Batcher:
    """Owns the waiting requests and the workers that hand them to the model in batches."""

    def __init__(self, run: Run, ready: Ready, max_batch: int, max_wait: float, max_queue: int, workers: int):
        self.run, self.ready = run, ready
        self.max_batch, self.max_wait, self.max_queue, self.workers = max(1, max_batch), max(0.0, max_wait), max(1, max_queue), max(1, workers)
        self._waiting: deque[_Job] = deque()
        self._arrived: Optional[asyncio.Event] = None
        self._tasks: list[asyncio.Task] = []
        self._batch_seconds = 1.0     # running mean of a batch's duration, for Retry-After
        self.batches = 0              # batches run so far, and requests in them (the server's own statistics)
        self.batched = 0
        self.running = 0              # batches in the model right now
        self._in_model: list[list[_Job]] = []
        self._closed: Optional[ApiError] = None

    def start(self) -> None:
        """Start the workers (inside the server's event loop)."""
        self._arrived = asyncio.Event()
        self._tasks = [asyncio.ensure_future(self._work(slot)) for slot in range(self.workers)]

    def refuse_all(self, error: ApiError) -> None:
        """Answer every request not yet answered, waiting or in the model, with `error`, and every later one too
        (the server is stopping: a client hears so now, rather than when a batch it cannot get ends)."""
        self._closed = error
        for job in [*self._waiting, *(job for batch in self._in_model for job in batch)]:
            if not job.future.done():
                job.future.set_exception(error)
        self._waiting.clear()

    async def stop(self) -> bool:
        """Stop the workers; True when a batch was still in the model (its thread or process goes on)."""
        busy = self.running > 0
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        return busy

    @property
    def waiting(self) -> int:
        return sum(1 for job in self._waiting if not job.future.done())

    async def submit(self, kind: str, items: Sequence[Any]) -> list[Any]:
        """The model's results for `items` (all admitted or none: n choices are one request)."""
        if self._closed is not None:
            raise self._closed
        if len(items) > self.max_queue:  # never admitted, however long the client waits: Retry-After would be a lie
            raise ApiError(400, f"'n' is {len(items)}, more than this server queues at once (--max-queue {self.max_queue})", "n")
        waiting = self.waiting
        if waiting + len(items) > self.max_queue:
            raise Busy(waiting, self._retry_after(waiting))
        assert self._arrived is not None, "Batcher.start() was not called"
        loop = asyncio.get_running_loop()
        jobs = [_Job(kind, item, loop.create_future()) for item in items]
        self._waiting.extend(jobs)
        self._arrived.set()
        try:
            return list(await asyncio.gather(*(job.future for job in jobs)))
        except asyncio.CancelledError:  # the client went away: its jobs leave the queue
            for job in jobs:
                job.future.cancel()
            raise

    def _retry_after(self, waiting: int) -> int:
        rounds = math.ceil((waiting + 1) / (self.max_batch * self.workers))
        return max(1, math.ceil(rounds * self._batch_seconds))

    def _take(self, kind: Optional[str]) -> Optional[_Job]:
        """The oldest live job (of `kind`, when given); cancelled ones are dropped on the way."""
        for job in list(self._waiting):
            if job.future.done():
                self._waiting.remove(job)
            elif kind is None or (job.kind == kind and not job.alone):
                self._waiting.remove(job)
                return job
        return None

    async def _gather(self) -> list[_Job]:
        """One batch: the oldest job, then more of its kind until full or max_wait has passed."""
        assert self._arrived is not None
        first = self._take(None)
        while first is None:
            self._arrived.clear()
            await self._arrived.wait()
            first = self._take(None)
        batch = [first]
        if first.alone:
            return batch
        deadline = time.monotonic() + self.max_wait
        while len(batch) < self.max_batch:
            job = self._take(first.kind)
            if job is not None:
                batch.append(job)
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                break
        return batch

    @staticmethod
    def _fail(batch: list[_Job], error: BaseException) -> None:
        for job in batch:
            if not job.future.done():
                job.future.set_exception(error)

    def _fail_or_retry(self, batch: list[_Job], error: WorkerDied) -> None:
        """A worker died in a batch of several: which request killed it is unknown, so each runs again alone, first
        in the queue (the one that kills a worker again fails then); a request that was alone fails now."""
        if len(batch) == 1 or self._closed is not None:
            self._fail(batch, error)
            return
        for job in reversed(batch):
            job.alone = True
            self._waiting.appendleft(job)
        assert self._arrived is not None
        self._arrived.set()

    async def _work(self, slot: int) -> None:
        while True:
            await self.ready(slot)  # a worker being replaced takes nothing: the others serve the queue meanwhile
            batch = await self._gather()
            started = time.monotonic()
            self.running += 1
            self._in_model.append(batch)
            try:
                results = await self.run(slot, batch[0].kind, [job.item for job in batch])
            except WorkerDied as exc:
                self._fail_or_retry(batch, exc)
                continue
            except Exception as exc:  # noqa: BLE001 - the batch's requests fail with it; the worker goes on
                self._fail(batch, exc)
                continue
            finally:
                self.running -= 1
                self._in_model = [b for b in self._in_model if b is not batch]
            self._batch_seconds = 0.8 * self._batch_seconds + 0.2 * (time.monotonic() - started)
            self.batches += 1
            self.batched += len(batch)
            for job, result in zip(batch, results):
                if not job.future.done():
                    job.future.set_result(result)
