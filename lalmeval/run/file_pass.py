"""The pass of `lalmeval score`: a dataset's selected samples answered from a prediction file instead of an endpoint.

It stands where an inference job stands — a RecordStream the Engines read, one record per selected
sample through the Ledger, written to records/ — so the file's predictions are scored by the very
code that scores a run's replies.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

from lalmeval.data.choices import LETTERS
from lalmeval.data.predictions import Predictions
from lalmeval.data.source import Source
from lalmeval.errors import UserError, WriteFailed
from lalmeval.inference.job import RecordStream
from lalmeval.postprocess.base import Postprocessor
from lalmeval.preprocess.base import Preprocessor
from lalmeval.results.ledger import Ledger
from lalmeval.results.records import Record, Sample

BATCH = 64   # samples turned into records per trip to a worker thread


@dataclass
class FilePass:
    """Records of one dataset on one model, made from a prediction file; Engines read `stream` as they read a job's."""

    dataset: str
    source: Source
    predictions: Predictions
    preprocessor: Preprocessor
    postprocessor: Postprocessor
    stream: RecordStream = field(default_factory=RecordStream)
    repeats: int = 1                      # a prediction file holds one answer per sample
    matched: set[str] = field(default_factory=set)   # file ids that named a selected sample
    failure: Optional[Exception] = None   # why the data could not be read to its end, if it could not
    first_ids: list[str] = field(default_factory=list)   # the dataset's first sample ids, to show beside the file's

    def record(self, sample: Sample) -> Record:
        """The record of one sample: the file's prediction as the model's reply, or the reason there is none."""
        row = self.predictions.by_id.get(sample.id)
        if len(self.first_ids) < 3:
            self.first_ids.append(sample.id)
        if row is not None:
            self.matched.add(sample.id)
        record = Record(id=sample.id, prompt="", system=None, params={}, reference=sample.reference, transcript=sample.transcript,
                        subset=sample.subset, extra={"predictions_row": row.row} if row is not None else {})
        if sample.problem:
            record.error = sample.problem
            return record
        try:
            prompt = self.preprocessor.prompt(sample, 0)   # what the judge is shown as the question; options as the data has them
            record.prompt, record.system = prompt.text, prompt.system
            if prompt.options:  # multiple choice: the gold option comes from the data
                record.extra.update(options=list(prompt.options), gold=prompt.gold, permutation=list(prompt.permutation))
                record.reference = f"{LETTERS[prompt.gold]}. {prompt.options[prompt.gold]}" if prompt.gold is not None else None
            elif row is not None and row.reference is not None:
                record.reference = row.reference
            if row is None or (row.text is None and row.problem is None):
                record.error = self.predictions.missing(row)
            elif row.problem is not None:
                record.error = row.problem
            else:
                record.reply = row.text
                record.prediction = self.postprocessor.process(row.text)
        except Exception as exc:  # noqa: BLE001 - a sample nobody foresaw fails alone, with its reason
            record.error = f"internal error: {type(exc).__name__}: {exc}"
        return record

    def _records(self, samples: Iterator[Sample]) -> list[Record]:
        return [self.record(sample) for sample in itertools.islice(samples, BATCH)]

    async def run(self, persist: Callable[[Record], None], stop: asyncio.Event) -> None:
        """Publish one record per selected sample (blocking reads and record building in a worker thread).

        Data that breaks off fails what the pass still owes with the reason (kept in `failure`); a
        refused write stops the pass (WriteFailed goes on to the caller)."""
        blank = lambda unit: Record(id=unit[0], repeat=unit[1], prompt="", system=None, params={}, reference=None)  # noqa: E731
        ledger = Ledger(self.source.ids, self.stream.push, persist, blank)
        loop = asyncio.get_running_loop()
        samples = self.source.samples()
        try:
            while True:
                await self.stream.room(stop)   # the Engines keep up: memory stays bounded
                batch = await loop.run_in_executor(None, self._records, samples)
                if not batch:
                    break
                for record in batch:
                    ledger.admit(record.id)
                    ledger.settle(record)
        except WriteFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - see the docstring
            self.failure = exc
            ledger.fail_open(f"data: {exc}" if isinstance(exc, UserError) else f"data: {type(exc).__name__}: {exc}", persist=True)
        finally:
            ledger.fail_open("internal error: the pass ended without a record for this sample", persist=False)
            self.stream.close()

    def unmatched(self) -> list[str]:
        """The file's ids that named no selected sample, in the file's order."""
        return [i for i in self.predictions.by_id if i not in self.matched]
