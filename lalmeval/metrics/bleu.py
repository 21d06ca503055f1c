"""bleu and chrf: sacrebleu corpus scores, from per-sample sufficient statistics.

Each sample keeps sacrebleu's own segment statistics (BLEU: hypothesis and reference length,
n-gram matches and totals; chrF: character n-gram counts). Their sum through sacrebleu's
`_compute_score_from_stats` is exactly what `corpus_score` computes, and the bootstrap resums them.
"""

from __future__ import annotations

import functools
from typing import Any, Optional

import numpy as np

from lalmeval.catalog.bundled import install
from lalmeval.catalog.runspecs import Dataset
from lalmeval.errors import UserError
from lalmeval.metrics.base import (
    METRICS,
    Metric,
    SampleScore,
    empty_reference,
    sample_stats,
    unscored,
)
from lalmeval.metrics.peer_text import PeerText, peer_name, peer_text, side_by_side
from lalmeval.metrics.reading import (
    judged_texts,
    read_text,
    reading_details,
    reading_mode,
    reading_step,
    text_fields,
)
from lalmeval.postprocess.reading import TextReading
from lalmeval.results.records import Record
from lalmeval.stats import SampleStats

# sacrebleu's own default per target language, plus char for scripts without spaces that it has
# no word tokenizer for (13a would make a whole Thai sentence one token).
_TOKENIZERS = {"zh": "zh", "yue": "zh", "ja": "ja-mecab", "ko": "ko-mecab", "th": "char", "lo": "char", "my": "char", "km": "char"}
_EXTRAS = {"ja-mecab": ("Japanese", "ja"), "ko-mecab": ("Korean", "ko")}


def bleu_tokenizer(language: str) -> str:
    """sacrebleu's tokenizer for a target language: zh, ja-mecab, ko-mecab, char (th/lo/my/km) or 13a."""
    return _TOKENIZERS.get(language, "13a")


class _Sacrebleu(Metric):
    """A sacrebleu metric scored from summed segment statistics."""

    def corpus_metric(self) -> Any:
        raise NotImplementedError

    def sentence_metric(self) -> Any:
        return self.corpus_metric()

    @functools.cached_property
    def _corpus(self) -> Any:
        return self.corpus_metric()

    @functools.cached_property
    def _sentence(self) -> Any:
        return self.sentence_metric()

    display_fields = frozenset({"hypothesis", "reference", "read", "hypothesis_scored", "reference_scored"})

    @classmethod
    def needs_judge(cls, dataset: Dataset) -> bool:
        return dataset.spec.reading == "judge"

    def score_record(self, record: Record) -> SampleScore:
        return self.score_read(record, read_text(record.prediction or "", reading_mode(self.dataset, self.context), "translation",
                                                  self.dataset.iso_target_language))

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        if reading_mode(self.dataset, self.context) != "judge" or self.context.judge is None:
            return await super().score_records(records)
        return await judged_texts(self, records, "translation")

    def score_read(self, record: Record, reading: TextReading) -> SampleScore:
        """The sample's statistics with `reading.text` as its hypothesis."""
        hypothesis, reference = reading.text.strip(), (record.reference or "").strip()
        if (empty := empty_reference(reference)) is not None:  # BLEU and chrF see the raw texts: nothing to normalize away
            return unscored(empty, hypothesis=hypothesis, reference=reference)
        stats = [int(v) for v in self._corpus._extract_corpus_statistics([hypothesis], [[reference]])[0]]
        score = self._sentence._compute_score_from_stats(stats).score
        return {"score": score, "hypothesis": hypothesis, "reference": reference, "stats": stats, **text_fields(reading)}

    def _score_of(self, sums: np.ndarray) -> np.ndarray:
        return np.array([self._corpus._compute_score_from_stats([int(v) for v in np.rint(row)]).score for row in sums])

    def sample_stats(self, items: list[SampleScore]) -> Optional[SampleStats]:
        return sample_stats(items, lambda x: x["stats"], self._score_of)

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        kept = [x["stats"] for x in items if x["score"] is not None]
        details: dict[str, Any] = {"scored": len(kept), "reading": reading_details(items, reading_mode(self.dataset, self.context))}
        if not kept:
            return None, details
        result = self._corpus._compute_score_from_stats([sum(column) for column in zip(*kept)])
        details["signature"] = str(self._corpus.get_signature())
        return result.score, {**details, **self.result_details(result)}

    def result_details(self, result: Any) -> dict[str, Any]:
        return {}


@METRICS.register("bleu")
class Bleu(_Sacrebleu):
    """sacrebleu corpus BLEU with the target language's tokenizer (named in details with sacrebleu's signature)."""

    name = "bleu"
    reads_protocol = True

    @classmethod
    def check_dataset(cls, dataset: Dataset) -> None:
        tokenizer = bleu_tokenizer(dataset.iso_target_language)
        if tokenizer not in _EXTRAS:
            return
        from sacrebleu.metrics import BLEU

        try:
            BLEU(tokenize=tokenizer)
        except (RuntimeError, ImportError, AssertionError):
            language, extra = _EXTRAS[tokenizer]
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': metric 'bleu' tokenizes {language} with MeCab "
                            f"(sacrebleu's {tokenizer}), which is not installed: pip install 'sacrebleu[{extra}]' "
                            f"(or {install(extra)})") from None

    @property
    def tokenizer(self) -> str:
        return bleu_tokenizer(self.dataset.iso_target_language)

    def corpus_metric(self) -> Any:
        from sacrebleu.metrics import BLEU

        return BLEU(tokenize=self.tokenizer)

    def sentence_metric(self) -> Any:
        from sacrebleu.metrics import BLEU

        return BLEU(tokenize=self.tokenizer, effective_order=True)  # as sacrebleu.sentence_bleu

    def result_details(self, result: Any) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer, "precisions": result.precisions, "bp": result.bp,
                "hyp_len": result.sys_len, "ref_len": result.ref_len}

    @functools.cached_property
    def peer(self) -> Optional[PeerText]:
        return peer_text(self.dataset)

    @functools.cached_property
    def _peer_bleu(self) -> Any:
        from sacrebleu.metrics import BLEU

        return BLEU(tokenize=self.peer.bleu_tokenizer(self.dataset))

    def score_read(self, record: Record, reading: TextReading) -> SampleScore:
        if self.peer is None:
            return super().score_read(record, reading)
        # The score is the peer's: the text this dataset's reading gives (the reply as written under the protocol's
        # verbatim, the judge's span under `reading: judge`), prepared as the peer prepares it, its tokenizer.
        # lalmeval's own statistics ride along: the reply read carefully, scored by lalmeval's tokenizer. Both readings
        # go through here, so a judged run keeps the own statistics its aggregate sums.
        careful = read_text(record.prediction or "", "careful", "translation", self.dataset.iso_target_language)
        own = super().score_read(record, careful)
        if own["score"] is None:
            return own
        hypothesis, reference = (self.peer.prepare(text.strip(), self.dataset) for text in (reading.text, record.reference or ""))
        stats = [int(v) for v in self._peer_bleu._extract_corpus_statistics([hypothesis], [[reference]])[0]]
        plain = {k: v for k, v in own.items() if k not in ("reading", "read", "refusal")}  # the careful reading's fields
        return {**plain, "hypothesis": reading.text.strip(), **text_fields(reading), "score": self._sentence._compute_score_from_stats(stats).score,
                "stats": stats, "own_stats": own["stats"], "hypothesis_scored": hypothesis, "reference_scored": reference}

    def _score_of(self, sums: np.ndarray) -> np.ndarray:
        scorer = self._peer_bleu if self.peer else self._corpus
        return np.array([scorer._compute_score_from_stats([int(v) for v in np.rint(row)]).score for row in sums])

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        value, details = super().aggregate(items)
        kept = [x for x in items if x["score"] is not None]
        if self.peer is None or not kept:
            return value, details
        own = self._corpus._compute_score_from_stats([sum(c) for c in zip(*(x["own_stats"] for x in kept))]).score
        peer = self._peer_bleu._compute_score_from_stats([sum(c) for c in zip(*(x["stats"] for x in kept))])
        details.update(self.result_details(peer), tokenizer=self.peer.bleu_tokenizer(self.dataset), signature=str(self._peer_bleu.get_signature()))
        details["lalmeval"] = {**side_by_side(self.peer, peer.score, own), "tokenizer": self.tokenizer}
        return peer.score, details


@METRICS.register("chrf")
class Chrf(_Sacrebleu):
    """sacrebleu corpus chrF (character 6-grams, beta 2), with sacrebleu's signature in details."""

    name = "chrf"

    def corpus_metric(self) -> Any:
        from sacrebleu.metrics import CHRF

        return CHRF()

    @functools.cached_property
    def _own_beside(self) -> bool:
        """A peer protocol whose reading is not lalmeval's: the careful chrF is kept beside its own (details.lalmeval)."""
        return peer_name(self.dataset) is not None and reading_mode(self.dataset, self.context) != "careful"

    def score_read(self, record: Record, reading: TextReading) -> SampleScore:
        item = super().score_read(record, reading)
        if self._own_beside and item["score"] is not None:
            careful = read_text(record.prediction or "", "careful", "translation", self.dataset.iso_target_language)
            item["own_stats"] = super().score_read(record, careful)["stats"]
        return item

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        value, details = super().aggregate(items)
        kept = [x["own_stats"] for x in items if x["score"] is not None and "own_stats" in x]
        if self._own_beside and kept:
            own = self._corpus._compute_score_from_stats([sum(column) for column in zip(*kept)]).score
            details["lalmeval"] = side_by_side(str(peer_name(self.dataset)), value, own, reading_step(reading_mode(self.dataset, self.context)))
        return value, details
