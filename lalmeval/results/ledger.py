"""The invariant the product rests on: every selected sample of a pass ends as exactly one record.

A pass (one dataset on one model) opens a Ledger with the ids it selected (times the repeats it
asks: a unit is a (sample id, repeat) pair). Each unit is settled once, with a prediction or an
error and its reason. Whatever stops the pass — an exception, a
cancelled task, Ctrl-C, a full disk — the pass closes its ledger with the reason, and every sample
still open is settled as failed with that reason. Scores are computed only from settled records,
so `num_samples` always equals the samples selected.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

from lalmeval.results.records import Record, failure_kind

Unit = tuple[str, int]   # (sample id, repeat)
INTERRUPTED = "interrupted: not requested before the run stopped (resume the run to request it)"
NOT_RUN = failure_kind(INTERRUPTED)   # the failure kind of a sample the stopped run never requested: not run, not failed


class InvariantError(AssertionError):
    """A record for a sample that was not selected, or a second record for one sample."""


class Ledger:
    """The open samples of one pass; `settle` accepts exactly one record per selected id.

    With `ids=None` (a streamed dataset, whose ids are learnt as it is read) samples are opened one
    by one with `admit`; the same rules hold for every sample admitted."""

    def __init__(self, ids: Optional[Iterable[str]], publish: Callable[[Record], None], persist: Callable[[Record], None],
                 blank: Callable[[Unit], Record], repeats: int = 1):
        self.repeats = repeats
        self._open: dict[Unit, None] = {} if ids is None else {(i, r): None for i in ids for r in range(repeats)}
        self.streamed = ids is None
        self.selected = len(self._open)
        self._settled: set[Unit] = set()
        self._publish, self._persist, self._blank = publish, persist, blank

    @property
    def open_count(self) -> int:
        return len(self._open)

    def admit(self, sample_id: str) -> None:
        """A streamed sample becomes owed its records (a selected one already is)."""
        if not self.streamed:
            if (sample_id, 0) not in self._open:
                raise InvariantError(f"sample {sample_id!r} was read but not selected")
            return
        units = [(sample_id, r) for r in range(self.repeats)]
        if any(u in self._open or u in self._settled for u in units):
            raise InvariantError(f"id {sample_id!r} appears twice in the data (ids must be unique)")
        self._open.update(dict.fromkeys(units))
        self.selected += len(units)

    def settle(self, record: Record, persist: bool = True) -> None:
        """Publish the one record of a unit (and write it to the run's records unless `persist` is off)."""
        if record.unit not in self._open:
            raise InvariantError(f"record for sample {record.id!r} (repeat {record.repeat}), which is not open in this pass")
        del self._open[record.unit]
        self._settled.add(record.unit)
        try:
            if persist:
                self._persist(record)
        finally:
            self._publish(record)

    def fail_open(self, reason: str, persist: bool) -> int:
        """Settle every open sample as failed with `reason`; returns how many there were."""
        count = 0
        for unit in list(self._open):
            record = self._blank(unit)
            record.error = reason
            self.settle(record, persist=persist)
            count += 1
        return count
