"""Start-up reads that Ctrl-C may abandon: opening a dataset or a stored run can take minutes."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")
_SLOTS = threading.BoundedSemaphore(8)  # as many reads at once as the run's thread pool has workers
_here = threading.local()  # .abandoned: the Event of the abandonable read this thread runs, if any


class Abandoned(Exception):
    """Raised inside an abandoned read by `stop_if_abandoned`: nobody waits for its result any more."""


def stop_if_abandoned() -> None:
    """Long loops of a read call this now and then. A CPU-bound read left running competes with the
    main thread for the GIL, so the shutdown after Ctrl-C would crawl until the read ended."""
    event = getattr(_here, "abandoned", None)
    if event is not None and event.is_set():
        raise Abandoned()


async def abandonable(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a daemon thread. Cancelling the await leaves the thread to finish or to die with
    the process: neither the event loop's shutdown nor the interpreter's exit waits for it, as they
    would for a thread of the loop's executor."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()
    abandoned = threading.Event()

    def settle(outcome: Callable[[Any], None], value: Any) -> None:
        if not future.done():  # cancelled: nobody waits for it any more
            outcome(value)

    def work() -> None:
        _here.abandoned = abandoned
        try:
            with _SLOTS:
                outcome: tuple[Callable[[Any], None], Any] = (future.set_result, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, as an executor would
            outcome = (future.set_exception, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: the run ended without this result
            pass

    threading.Thread(target=work, name="lalmeval-read", daemon=True).start()
    try:
        return await future
    except asyncio.CancelledError:
        abandoned.set()
        raise
