"""An in-flight limit that shrinks under overload and grows back on success (AIMD)."""

from __future__ import annotations

import asyncio
import time
from collections import deque


class AdaptiveLimit:
    """Like a semaphore of `maximum`, but 429s and timeouts halve the limit (at most once per
    `cooldown` seconds) and each `limit` successes in a row raise it by one, back up to `maximum`."""

    def __init__(self, maximum: int, cooldown: float = 1.0):
        self.maximum = maximum
        self.limit = maximum
        self.in_flight = 0
        self.cooldown = cooldown
        self._waiters: deque[asyncio.Future] = deque()
        self._successes = 0
        self._last_cut = float("-inf")

    async def __aenter__(self) -> None:
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # the slot is counted for us by _wake
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def overloaded(self) -> None:
        """The endpoint pushed back (429, timeout): halve the limit."""
        now = time.monotonic()
        if now - self._last_cut >= self.cooldown:
            self.limit = max(1, self.limit // 2)
            self._last_cut = now
        self._successes = 0

    def succeeded(self) -> None:
        """A request went through: grow the limit by one per `limit` successes."""
        if self.limit >= self.maximum:
            return
        self._successes += 1
        if self._successes >= self.limit:
            self.limit += 1
            self._successes = 0
            self._wake()
