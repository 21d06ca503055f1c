"""One worker process holding its own copy of the model, fed batches over a pipe; its death is a reason, not a broken pool.

A worker that dies (a segfault in a C decoder, the out-of-memory killer, `os._exit` in the model)
fails the batch it was running, with a reason naming how it died (the Batcher runs a batch of
several again one by one); the server starts another.
A worker also ends by itself when the server is gone (its lifeline pipe closes), so no copy of the
model outlives the server however the server ended.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from multiprocessing.connection import Connection, wait
from typing import Any, Optional

from lalmeval.serve.errors import ApiError

STOP_SECONDS = 5.0  # how long a worker is given to end on SIGTERM before it is killed


class WorkerDied(ApiError):
    """HTTP 500: the worker process running the request ended (the message says how)."""

    def __init__(self, how: str):
        super().__init__(500, f"the model's worker process died while running this request: {how}; it is being replaced")
        self.how = how


class WorkerFailed(Exception):
    """A worker that could not load the model: the message is the one line the server prints."""


def how_it_ended(exitcode: Optional[int]) -> str:
    """'killed by SIGSEGV (Segmentation fault)', 'exited with code 3': an exit status in words."""
    if exitcode is None:
        return "it stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        described = signal.strsignal(-exitcode) or name
        hint = " (the out-of-memory killer, or kill -9)" if -exitcode == signal.SIGKILL else ""
        return f"killed by {name} ({described}){hint}"
    return f"exited with code {exitcode} (sys.exit or os._exit in the model?)"


def _leave_with_server(lifeline: Connection) -> None:
    """Block until the server's end of the lifeline closes (the server ended, however), then end at once."""
    try:
        lifeline.recv()
    except (EOFError, OSError):
        pass
    os._exit(0)


def _serve_batches(spec: str, conn: Connection, lifeline: Connection) -> None:
    """A worker's life: load the model, say so, then answer batches until told to stop or the server is gone."""
    from lalmeval.errors import UserError
    from lalmeval.serve.loading import load_model, load_weights
    from lalmeval.serve.batches import guarded_batch

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the server decides
    threading.Thread(target=_leave_with_server, args=(lifeline,), daemon=True).start()
    try:
        model = load_model(spec)
        load_weights(spec, model)
    except UserError as exc:
        conn.send(("failed", str(exc)))
        return
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        results = guarded_batch(model, *message)
        try:
            conn.send(results)
        except Exception as exc:  # noqa: BLE001 - an answer that cannot cross to the server fails its batch, not the worker
            from lalmeval.serve.replies import ModelBug

            conn.send(ModelBug(f"the answer cannot be sent from the worker process: {type(exc).__name__}: {exc}"))


class Worker:
    """The server's handle on one worker process: start it, hand it a batch, stop it."""

    def __init__(self, spec: str):
        context = multiprocessing.get_context("spawn")  # not fork: the server's threads and event loop must not be copied
        self.conn, child = context.Pipe()
        keep, self._lifeline = context.Pipe(duplex=False)
        self.process = context.Process(target=_serve_batches, args=(spec, child, keep), name="lalmeval-model-worker")
        self.stopped = False
        self.process.start()
        child.close()
        keep.close()

    def _receive(self) -> Any:
        """The worker's next message, or WorkerDied saying how it ended."""
        try:
            wait([self.conn, self.process.sentinel])
            if self.conn.poll():
                return self.conn.recv()
        except (EOFError, OSError, ValueError):  # ValueError, OSError: stop() closed the handles meanwhile
            pass
        if self.stopped:
            raise WorkerDied("the server stopped it")
        self.process.join(STOP_SECONDS)
        raise WorkerDied(how_it_ended(self.process.exitcode))

    def ready(self) -> None:
        """Wait until the model is loaded; WorkerFailed with the worker's one-line reason when it could not be."""
        try:
            state, detail = self._receive()
        except WorkerDied as exc:
            raise WorkerFailed(f"a worker process ended while loading the model: {exc.how}") from None
        if state != "ready":
            raise WorkerFailed(detail)

    def run(self, kind: str, items: list[Any]) -> Any:
        """One batch's results (blocks: call in a thread); WorkerDied when the process ends meanwhile."""
        try:
            self.conn.send((kind, items))
        except (OSError, ValueError):
            pass  # the worker is gone: _receive says how
        result = self._receive()
        if isinstance(result, BaseException):
            raise result
        return result

    def stop(self) -> None:
        """End the process: SIGTERM, then SIGKILL after STOP_SECONDS; every handle closed (a second call does nothing)."""
        if self.stopped:
            return
        self.stopped = True
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(STOP_SECONDS)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        for handle in (self.conn, self._lifeline):
            handle.close()
        self.process.close()


def stop_resource_tracker() -> None:
    """End multiprocessing's resource tracker, which starting a worker started (it would outlive the server otherwise)."""
    from multiprocessing import resource_tracker

    tracker = resource_tracker._resource_tracker
    if getattr(tracker, "_pid", None) is not None:
        tracker._stop()
