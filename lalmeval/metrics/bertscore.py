"""bertscore: BERTScore F1 (optional extra: bert-score and its model)."""

from __future__ import annotations

import asyncio
import importlib.util

from lalmeval.config.schema import Config
from lalmeval.errors import UserError
from lalmeval.metrics.base import EMPTY_REFERENCE, METRICS, MeanMetric, SampleScore, text_pair, unscored
from lalmeval.results.records import Record


@METRICS.register("bertscore")
class BertScore(MeanMetric):
    """Mean BERTScore F1 (optional extra: needs bert-score and its model available offline)."""

    name = "bertscore"

    @classmethod
    def check(cls, config: Config) -> None:
        if importlib.util.find_spec("bert_score") is None:
            raise UserError("metric 'bertscore' needs the bert-score package and its model: pip install bert-score (the model downloads on first use)")

    def score_record(self, record: Record) -> SampleScore:
        return self._batch([record])[0]

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        return await asyncio.get_running_loop().run_in_executor(None, self._batch, records)

    def _batch(self, records: list[Record]) -> list[SampleScore]:
        from bert_score import score

        pairs = [text_pair(r) for r in records]
        usable = [i for i, (_, ref) in enumerate(pairs) if ref]
        items: list[SampleScore] = [unscored(EMPTY_REFERENCE) for _ in pairs]
        if usable:
            _, _, f1 = score([pairs[i][0] for i in usable], [pairs[i][1] for i in usable], lang=self.dataset.iso_target_language)
            for i, value in zip(usable, f1):
                items[i] = {"score": 100.0 * float(value)}
        return items
