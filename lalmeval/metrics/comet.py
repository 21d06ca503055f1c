"""comet: COMET (Unbabel/wmt22-comet-da) for speech translation (optional extra: unbabel-comet and its model).

COMET scores a translation against its reference *and its source sentence*: the source is the
dataset's transcript_column (CoVoST-2's `sentence`). The score is the mean segment score × 100,
as AU-Harness reports it; a sample without a reference or a source cannot be scored and is counted.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

from lalmeval.catalog.runspecs import Dataset
from lalmeval.config.schema import Config
from lalmeval.errors import UserError
from lalmeval.metrics.base import METRICS, MeanMetric, SampleScore, text_pair
from lalmeval.results.records import Record

MODEL = "Unbabel/wmt22-comet-da"


@METRICS.register("comet")
class Comet(MeanMetric):
    """Mean COMET segment score × 100 (optional extra: needs unbabel-comet and its model)."""

    name = "comet"
    _model: Any = None

    @classmethod
    def check(cls, config: Config) -> None:
        if importlib.util.find_spec("comet") is None:
            raise UserError(f"metric 'comet' needs the unbabel-comet package and its model: pip install unbabel-comet (the model {MODEL} downloads on first use)")

    @classmethod
    def check_dataset(cls, dataset: Dataset) -> None:
        if not dataset.spec.transcript_column:
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': metric 'comet' scores against the source sentence: set transcript_column")

    def score_record(self, record: Record) -> SampleScore:
        return self._batch([record])[0]

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        return await asyncio.get_running_loop().run_in_executor(None, self._batch, records)

    def _batch(self, records: list[Record]) -> list[SampleScore]:
        items: list[SampleScore] = []
        rows, where = [], []
        for i, record in enumerate(records):
            hypothesis, reference = text_pair(record)
            source = (record.transcript or "").strip()
            items.append({"score": None, "reason": "empty reference" if not reference else "no source sentence"})
            if reference and source:
                rows.append({"src": source, "mt": hypothesis, "ref": reference})
                where.append(i)
        if rows:
            for i, value in zip(where, self._scorer().predict(rows, batch_size=8, gpus=0, progress_bar=False).scores):
                items[i] = {"score": 100.0 * float(value)}
        return items

    @classmethod
    def _scorer(cls) -> Any:
        if cls._model is None:  # one model per process: loading it takes longer than scoring a batch
            from comet import download_model, load_from_checkpoint

            cls._model = load_from_checkpoint(download_model(MODEL))
        return cls._model
