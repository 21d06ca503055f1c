"""bleu / chrf / rouge agree with the reference implementations; optional extras refuse at start."""

from pathlib import Path

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from lalmeval.config import parse_config
from lalmeval.errors import UserError
from lalmeval.metrics import METRICS
from lalmeval.metrics.text import Bleu, Chrf, Rouge
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.records import Record
from lalmeval.runspecs import Dataset, DatasetSpec

EN = [("The cat sat on the mat.", "The cat is sitting on the mat."), ("It is raining today", "Today it rains"),
      ("I like green tea with honey.", "I like green tea with honey."), ("Turn left at the station", "Go left at the station")]
ZH = [("今天天气很好", "今天的天气很好。"), ("我们去公园散步", "我们去公园走走")]


def scored(cls, pairs, language="en", target=None):
    spec = DatasetSpec(hf_repo="x", language=language, target_language=target)
    metric = cls(Dataset("d", "c", "t", spec, Path("x.json")), GeneralPostprocessor())
    items = [metric.score_record(Record(id=str(i), prompt="", system=None, params={}, reference=r, prediction=h)) for i, (h, r) in enumerate(pairs)]
    return metric.aggregate(items), items


def test_bleu_equals_sacrebleu_corpus_bleu_with_13a():
    (value, details), items = scored(Bleu, EN)
    expected = sacrebleu.corpus_bleu([h for h, _ in EN], [[r for _, r in EN]], tokenize="13a")
    assert value == pytest.approx(expected.score) and details["tokenizer"] == "13a"
    assert items[2]["score"] == pytest.approx(100.0)


def test_bleu_uses_the_target_languages_tokenizer():
    (value, details), _ = scored(Bleu, ZH, language="en", target="zh")  # English speech translated to Chinese
    expected = sacrebleu.corpus_bleu([h for h, _ in ZH], [[r for _, r in ZH]], tokenize="zh")
    assert details["tokenizer"] == "zh" and value == pytest.approx(expected.score)
    (_, details), _ = scored(Bleu, ZH, language="ja")
    assert details["tokenizer"] in ("ja-mecab", "char")


def test_chrf_equals_sacrebleu():
    (value, _), _ = scored(Chrf, EN)
    assert value == pytest.approx(sacrebleu.corpus_chrf([h for h, _ in EN], [[r for _, r in EN]]).score)


def test_rouge_equals_rouge_score_for_english():
    (value, details), _ = scored(Rouge, EN)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    expected = [scorer.score(r, h) for h, r in EN]
    assert value == pytest.approx(100 * sum(e["rougeL"].fmeasure for e in expected) / len(EN))
    assert details["rouge1"] == pytest.approx(100 * sum(e["rouge1"].fmeasure for e in expected) / len(EN))


def test_rouge_counts_characters_for_chinese():
    (value, _), items = scored(Rouge, [("今天天气很好", "今天天气很好")], language="zh")
    assert value == pytest.approx(100.0)


def test_empty_references_are_excluded_not_zero():
    (value, details), _ = scored(Bleu, EN[2:3] + [("anything", "")])
    assert value == pytest.approx(100.0) and details["empty_references"] == 1


def config():
    return parse_config({"dataset_metric": [["x", "meteor"]], "models": [{"name": "m", "url": "http://127.0.0.1:8000/v1", "model": "m"}]}, "c.yaml")


def test_meteor_without_wordnet_refuses_at_start(tmp_path, monkeypatch):
    monkeypatch.setenv("LALMEVAL_WORDNET_DIR", str(tmp_path))
    with pytest.raises(UserError, match="metric 'meteor' needs nltk and WordNet: .*apt-get install wordnet-base"):
        METRICS.get("meteor").check(config())


def test_bertscore_without_the_package_refuses_at_start(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bert_score" else real(name, *a))
    with pytest.raises(UserError, match="metric 'bertscore' needs the bert-score package"):
        METRICS.get("bertscore").check(config())
