"""Running a model's batches, in threads or in worker processes that are replaced when they die."""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Union

from lalmeval.errors import UserError
from lalmeval.serve.errors import ApiError
from lalmeval.serve.loading import load_model, load_weights
from lalmeval.serve.model import AudioModel, Reply
from lalmeval.serve.batches import CHAT, SPEECH, TRANSCRIPTION, guarded_batch, run_batch
from lalmeval.serve.workers import Worker, WorkerDied, WorkerFailed, stop_resource_tracker

__all__ = ["CHAT", "SPEECH", "TRANSCRIPTION", "Runner", "guarded_batch", "load_model", "run_batch"]

RESTART_BACKOFF = (1.0, 60.0)  # seconds between attempts to replace a worker whose model fails to load: first, most


class Runner:
    """Where batches run: the loaded model in threads, or copies of it in worker processes."""

    def __init__(self, spec: str, model: AudioModel):
        self.spec, self.model = spec, model
        self.abandoned = False
        self.replaced = 0             # worker processes that died and were replaced
        self.workers = model.processes or max(1, model.concurrency)
        # threads that run the model, or that wait for worker processes (two a slot: a batch, and a replacement loading)
        self.threads = ThreadPoolExecutor(self.workers * (2 if model.processes else 1), thread_name_prefix="model")
        self._processes: list[Optional[Worker]] = []
        self._ready: list[asyncio.Event] = []
        self._restarts: set[asyncio.Task] = set()

    def load(self) -> None:
        """Load the weights: here, or in every worker process, before the server answers; UserError when they do not load."""
        if not self.model.processes:
            load_weights(self.spec, self.model)
            return
        for _ in range(self.model.processes):
            self._processes.append(Worker(self.spec))
        try:
            for worker in self._processes:
                worker.ready()
        except WorkerFailed as exc:
            raise UserError(str(exc)) from None

    def start(self) -> None:
        """Inside the server's event loop, before the first batch."""
        self._ready = [asyncio.Event() for _ in range(self.workers)]
        for event in self._ready:
            event.set()

    @property
    def ready_workers(self) -> int:
        return sum(event.is_set() for event in self._ready)

    async def wait_ready(self, slot: int) -> None:
        """Until worker `slot` can take a batch (at once, unless it is being replaced)."""
        await self._ready[slot].wait()

    async def run(self, slot: int, kind: str, items: list[Any]) -> list[Union[Reply, ApiError]]:
        """One batch's results, run by worker `slot`; an ApiError for the whole batch when it failed."""
        loop = asyncio.get_running_loop()
        if not self.model.processes:
            results = await loop.run_in_executor(self.threads, guarded_batch, self.model, kind, items)
        else:
            worker = self._processes[slot]
            assert worker is not None
            try:
                results = await loop.run_in_executor(self.threads, worker.run, kind, items)
            except WorkerDied as exc:
                print(f"worker process {worker.process.pid} {exc.how}; starting another", file=sys.stderr, flush=True)
                self._replace(slot)
                raise
        if isinstance(results, ApiError):
            raise results
        return results

    def _replace(self, slot: int) -> None:
        self._ready[slot].clear()
        self.replaced += 1
        task = asyncio.ensure_future(self._restart(slot))
        self._restarts.add(task)
        task.add_done_callback(self._restarts.discard)

    async def _restart(self, slot: int) -> None:
        """A new worker in `slot`, tried again (waiting longer each time) while the model fails to load."""
        loop = asyncio.get_running_loop()
        dead, self._processes[slot] = self._processes[slot], None
        if dead is not None:
            await loop.run_in_executor(self.threads, dead.stop)
        pause = RESTART_BACKOFF[0]
        while True:
            worker = await loop.run_in_executor(self.threads, Worker, self.spec)
            self._processes[slot] = worker
            try:
                await loop.run_in_executor(self.threads, worker.ready)
            except WorkerFailed as exc:
                print(f"a replacement worker could not load the model: {exc}; trying again in {pause:g} s", file=sys.stderr, flush=True)
                await loop.run_in_executor(self.threads, worker.stop)
                self._processes[slot] = None
                await asyncio.sleep(pause)
                pause = min(pause * 2, RESTART_BACKOFF[1])
                continue
            self._ready[slot].set()
            return

    def close(self, abandon: bool = False) -> None:
        """Stop the workers; `abandon`: a thread is still in the model, and the server must not wait for it."""
        for task in list(self._restarts):
            task.cancel()
        self.threads.shutdown(wait=False, cancel_futures=True)
        self.abandoned = abandon and not self.model.processes
        for worker in self._processes:
            if worker is not None:
                worker.stop()
        if self.model.processes:
            stop_resource_tracker()
