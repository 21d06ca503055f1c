"""Reference-based text metrics: bleu, chrf (sacrebleu), rouge (rouge-score), meteor, bertscore."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path
from typing import Any, Optional

from lalmeval.config import Config
from lalmeval.errors import UserError
from lalmeval.languages import uses_characters
from lalmeval.metrics.base import METRICS, Metric, SampleScore
from lalmeval.metrics.normalize import normalize_basic
from lalmeval.records import Record


def bleu_tokenizer(language: str) -> str:
    """sacrebleu's tokenizer for a target language: 13a, zh, ja-mecab / ko-mecab when installed, else char."""
    if language in ("zh", "yue"):
        return "zh"
    if language in ("ja", "ko"):
        module = "MeCab" if language == "ja" else "mecab_ko"
        return f"{language}-mecab" if importlib.util.find_spec(module) else "char"
    if uses_characters(language):
        return "char"
    return "13a"


class _Corpus(Metric):
    """Keeps each pair; the score is computed over the whole corpus, as the standard tools do."""

    def pair(self, record: Record) -> tuple[str, str]:
        return (record.prediction or "").strip(), (record.reference or "").strip()

    def score_record(self, record: Record) -> SampleScore:
        hypothesis, reference = self.pair(record)
        if not reference:
            return {"score": None, "reason": "empty reference", "hypothesis": hypothesis, "reference": reference}
        return {"score": self.sentence(hypothesis, reference), "hypothesis": hypothesis, "reference": reference}

    def sentence(self, hypothesis: str, reference: str) -> float:
        raise NotImplementedError

    def scored(self, items: list[SampleScore]) -> tuple[list[str], list[str]]:
        kept = [x for x in items if x["score"] is not None]
        return [x["hypothesis"] for x in kept], [x["reference"] for x in kept]


@METRICS.register("bleu")
class Bleu(_Corpus):
    """sacrebleu corpus BLEU with the tokenizer of the target language (named in details)."""

    name = "bleu"

    @property
    def tokenizer(self) -> str:
        return bleu_tokenizer(self.dataset.iso_target_language)

    def sentence(self, hypothesis: str, reference: str) -> float:
        import sacrebleu

        return sacrebleu.sentence_bleu(hypothesis, [reference], tokenize=self.tokenizer).score

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        import sacrebleu

        hyps, refs = self.scored(items)
        if not hyps:
            return None, {"tokenizer": self.tokenizer, "scored": 0}
        result = sacrebleu.corpus_bleu(hyps, [refs], tokenize=self.tokenizer)
        return result.score, {"tokenizer": self.tokenizer, "signature": f"nrefs:1|tok:{self.tokenizer}|smooth:exp|version:{sacrebleu.__version__}",
                              "precisions": result.precisions, "bp": result.bp, "scored": len(hyps), "empty_references": len(items) - len(hyps)}


@METRICS.register("chrf")
class Chrf(_Corpus):
    """sacrebleu corpus chrF (character n-gram F-score)."""

    name = "chrf"

    def sentence(self, hypothesis: str, reference: str) -> float:
        import sacrebleu

        return sacrebleu.sentence_chrf(hypothesis, [reference]).score

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        import sacrebleu

        hyps, refs = self.scored(items)
        if not hyps:
            return None, {"scored": 0}
        return sacrebleu.corpus_chrf(hyps, [refs]).score, {"scored": len(hyps), "empty_references": len(items) - len(hyps)}


class _Tokens:
    """rouge-score's tokenizer interface over our basic normalizer (characters for unspaced scripts)."""

    def __init__(self, language: str):
        self.language = language

    def tokenize(self, text: str) -> list[str]:
        normalized = normalize_basic(text)
        return list(normalized.replace(" ", "")) if uses_characters(self.language) else normalized.split()


@METRICS.register("rouge")
class Rouge(_Corpus):
    """Mean ROUGE-1/2/L F1 (rouge-score); the score is ROUGE-L. English uses its standard tokenizer and stemmer."""

    name = "rouge"

    def _scorer(self):
        from rouge_score import rouge_scorer

        if not hasattr(self, "_cached_scorer"):
            language = self.dataset.iso_target_language
            options = {"use_stemmer": True} if language == "en" else {"tokenizer": _Tokens(language)}
            self._cached_scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], **options)
        return self._cached_scorer

    def score_record(self, record: Record) -> SampleScore:
        hypothesis, reference = self.pair(record)
        if not reference:
            return {"score": None, "reason": "empty reference"}
        scores = self._scorer().score(reference, hypothesis)
        values = {name: 100.0 * s.fmeasure for name, s in scores.items()}
        return {"score": values["rougeL"], **values}

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        kept = [x for x in items if x["score"] is not None]
        if not kept:
            return None, {"scored": 0}
        means = {name: sum(x[name] for x in kept) / len(kept) for name in ("rouge1", "rouge2", "rougeL")}
        return means["rougeL"], {**means, "scored": len(kept), "empty_references": len(items) - len(kept)}


def wordnet_dir() -> Optional[Path]:
    """Where WordNet is: LALMEVAL_WORDNET_DIR, nltk's data, or Debian's wordnet-base."""
    override = os.environ.get("LALMEVAL_WORDNET_DIR")
    candidates = [Path(override)] if override else [Path("/usr/share/wordnet")]
    return next((c for c in candidates if (c / "data.noun").exists()), None)


@METRICS.register("meteor")
class Meteor(_Corpus):
    """nltk METEOR (optional extra: needs nltk and WordNet)."""

    name = "meteor"

    @classmethod
    def check(cls, config: Config) -> None:
        if importlib.util.find_spec("nltk") is None or wordnet_dir() is None:
            raise UserError("metric 'meteor' needs nltk and WordNet: pip install nltk && apt-get install wordnet-base (or set LALMEVAL_WORDNET_DIR)")

    def _wordnet(self):
        if not hasattr(self, "_wn"):
            from nltk.corpus.reader.wordnet import WordNetCorpusReader

            self._wn = WordNetCorpusReader(str(wordnet_dir()), None)
        return self._wn

    def sentence(self, hypothesis: str, reference: str) -> float:
        from nltk.translate.meteor_score import meteor_score

        return 100.0 * meteor_score([reference.split()], hypothesis.split(), wordnet=self._wordnet())

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        return mean_score(items)


@METRICS.register("bertscore")
class BertScore(_Corpus):
    """BERTScore F1 (optional extra: needs bert-score and its model available offline)."""

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

        pairs = [self.pair(r) for r in records]
        usable = [i for i, (_, ref) in enumerate(pairs) if ref]
        items: list[SampleScore] = [{"score": None, "reason": "empty reference"} for _ in pairs]
        if usable:
            _, _, f1 = score([pairs[i][0] for i in usable], [pairs[i][1] for i in usable], lang=self.dataset.iso_target_language)
            for i, value in zip(usable, f1):
                items[i] = {"score": 100.0 * float(value)}
        return items

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        return mean_score(items)


def mean_score(items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
    """The mean of per-sample scores, with how many were scored."""
    kept = [x["score"] for x in items if x["score"] is not None]
    return (sum(kept) / len(kept) if kept else None), {"scored": len(kept), "empty_references": len(items) - len(kept)}
