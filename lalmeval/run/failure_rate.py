"""max_failure_rate: a run whose samples keep failing stops itself instead of spending the whole dataset.

Every finished sample of every pass is counted (interrupted ones are not: they were never asked).
Once at least MIN_SAMPLES have finished, the run stops as soon as the share that failed exceeds the
limit: no new request starts, those in flight finish, and what was not asked is left for a resume.
"""

from __future__ import annotations

from typing import Callable, Optional

from lalmeval.results.ledger import INTERRUPTED
from lalmeval.results.records import Record

MIN_SAMPLES = 20   # so that one early failure (1 of 1 = 100%) cannot stop a run


class FailureWatch:
    """Counts finished samples and failures; calls `stop` once when the failure share passes `limit`."""

    def __init__(self, limit: Optional[float], stop: Callable[[], None]):
        self.limit, self._stop = limit, stop
        self.finished = self.failed = 0
        self.stopped: Optional[str] = None   # the one line saying why the run stopped itself

    def observe(self, record: Record) -> None:
        """Listener of every pass's records."""
        if self.limit is None or record.error == INTERRUPTED:
            return
        self.finished += 1
        self.failed += record.failed
        if self.stopped is None and self.finished >= MIN_SAMPLES and self.failed > self.limit * self.finished:
            self.stopped = (f"stopped after {self.finished} samples: {self.failed} failed ({self.failed / self.finished:.0%}), "
                            f"more than max_failure_rate {self.limit:g} allows")
            self._stop()
