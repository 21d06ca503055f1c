"""Time left for passes that share servers.

Every pass of a model sends through the same endpoints, so the passes of one server share its
throughput: when one finishes, the others speed up. Extrapolating each pass alone from its own
rate ignores that and overstates the time left (two passes of equal size on one server each see
half its rate: alone, each would be forecast twice the time the two need together). Here each
server's recent throughput is shared among its unfinished passes in proportion to the rate each
gets now, and handed on as passes finish, so every pass's finish time and the run's end follow."""

from __future__ import annotations

import math
from collections import deque
from typing import Iterable, Optional, Sequence

WINDOW = 60.0   # seconds of history a rate is measured over: recent enough to follow a change of pace


class RateMeter:
    """Items per second over the last WINDOW seconds, from a running count sampled now and then."""

    def __init__(self, window: float = WINDOW):
        self.window = window
        self._samples: deque[tuple[float, int]] = deque()

    def observe(self, now: float, count: int) -> None:
        """Record the running count at time `now` (monotonic seconds)."""
        if self._samples and self._samples[-1][0] == now:
            self._samples.pop()
        self._samples.append((now, count))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def rate(self) -> float:
        """Items per second between the oldest sample kept and the newest; 0 before two samples."""
        if len(self._samples) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        return max(0, n1 - n0) / (t1 - t0) if t1 > t0 else 0.0


def finish_times(remaining: Sequence[float], rates: Sequence[float]) -> list[Optional[float]]:
    """Seconds until each pass of one server finishes, its `remaining` items (math.inf: unknown) served
    at the server's total rate, shared among unfinished passes in proportion to `rates`.

    A pass with no rate yet is given the mean rate of the others (it is waiting its turn, or has
    just begun). None where no estimate is possible: an unknown size, or a server doing nothing."""
    total = sum(rates)
    if total <= 0:
        return [None if r > 0 else 0.0 for r in remaining]
    moving = [r for r in rates if r > 0]
    weights = [r if r > 0 else sum(moving) / len(moving) for r in rates]
    left = list(remaining)
    done: list[Optional[float]] = [0.0 if r <= 0 else None for r in left]
    clock = 0.0
    active = [i for i, r in enumerate(left) if r > 0]
    while active and any(math.isfinite(left[i]) for i in active):
        share = sum(weights[i] for i in active)
        speeds = {i: total * weights[i] / share for i in active}
        step = min(left[i] / speeds[i] for i in active)
        clock += step
        for i in active:
            left[i] -= speeds[i] * step
        for i in [i for i in active if math.isfinite(left[i]) and left[i] <= 1e-9 * max(1.0, remaining[i])]:
            done[i] = clock
        active = [i for i in active if done[i] is None]
    return done


def shared_groups(servers: Sequence[Iterable[str]]) -> list[int]:
    """For each pass (given the server URLs it sends to), the index of its group: passes that share any
    server, directly or through another pass, are one group."""
    parent = list(range(len(servers)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, urls in enumerate(servers):
        for url in urls:
            if url in owner:
                parent[root(i)] = root(owner[url])
            else:
                owner[url] = i
    roots = [root(i) for i in range(len(servers))]
    order = {r: n for n, r in enumerate(dict.fromkeys(roots))}
    return [order[r] for r in roots]
