"""bleu / chrf / rouge / meteor agree with the reference implementations; missing extras refuse at start."""

import os
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from rouge_score import rouge_scorer

from lalmeval.catalog.runspecs import Dataset, DatasetSpec
from lalmeval.config.schema import parse_config
from lalmeval.errors import UserError
from lalmeval.metrics import METRICS, MetricContext
from lalmeval.metrics.bleu import Bleu, Chrf
from lalmeval.metrics.meteor import DEBIAN_WORDNET, Meteor
from lalmeval.metrics.rouge import Rouge
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.results.records import Record
from lalmeval.stats import resampled_sums

EN = [("The cat sat on the mat.", "The cat is sitting on the mat."), ("It is raining today", "Today it rains"),
      ("I like green tea with honey.", "I like green tea with honey."), ("Turn left at the station", "Go left at the station"),
      ("We will meet at noon near the old bridge.", "We meet at noon by the old bridge."), ("No", "Yes, of course")]
ZH = [("今天天气很好", "今天的天气很好。"), ("我们去公园散步", "我们去公园走走")]


def metric_for(cls, language="en", target=None):
    spec = DatasetSpec(hf_repo="x", language=language, target_language=target)
    return cls(Dataset("d", "c", "t", spec, Path("x.json")), GeneralPostprocessor(), MetricContext(resamples=200, seed=3))


def scored(cls, pairs, language="en", target=None):
    metric = metric_for(cls, language, target)
    items = [{"id": str(i), **metric.score_record(Record(id=str(i), prompt="", system=None, params={}, reference=r, prediction=h))}
             for i, (h, r) in enumerate(pairs)]
    return metric.aggregate(items), items


def test_bleu_equals_sacrebleu_corpus_bleu_exactly():
    (value, details), items = scored(Bleu, EN)
    expected = sacrebleu.corpus_bleu([h for h, _ in EN], [[r for _, r in EN]], tokenize="13a")
    assert value == expected.score and details["tokenizer"] == "13a"
    assert items[2]["score"] == pytest.approx(100.0)
    assert items[0]["score"] == pytest.approx(sacrebleu.sentence_bleu(EN[0][0], [EN[0][1]]).score)


def test_bleu_signature_is_sacrebleus_own():
    (_, details), _ = scored(Bleu, EN)
    bleu = sacrebleu.BLEU(tokenize="13a")
    bleu.corpus_score(["x"], [["y"]])
    assert details["signature"] == str(bleu.get_signature())
    assert f"version:{sacrebleu.__version__}" in details["signature"]


def test_bleu_bootstrap_replicate_is_sacrebleu_on_the_resampled_corpus():
    metric = metric_for(Bleu)
    items = [metric.score_record(Record(id=str(i), prompt="", system=None, params={}, reference=r, prediction=h)) for i, (h, r) in enumerate(EN)]
    stats = metric.sample_stats(items)
    rng = np.random.default_rng(11)
    picks = rng.integers(0, len(EN), size=len(EN))
    counts = np.bincount(picks, minlength=len(EN)).astype(float)
    replicate = stats.statistic((counts @ stats.values)[None, :])[0]
    expected = sacrebleu.corpus_bleu([EN[i][0] for i in picks], [[EN[i][1] for i in picks]]).score
    assert replicate == pytest.approx(expected, abs=1e-9)


def test_bleu_interval_brackets_the_score_and_repeats():
    metric = metric_for(Bleu)
    items = [metric.score_record(Record(id=str(i), prompt="", system=None, params={}, reference=r, prediction=h)) for i, (h, r) in enumerate(EN)]
    value, _ = metric.aggregate(items)
    first, again = metric.uncertainty(items, value), metric.uncertainty(items, value)
    assert first.ci95[0] <= value <= first.ci95[1] and first.ci95[0] < first.ci95[1]
    assert first == again and first.stderr > 0


def test_bleu_uses_the_target_languages_tokenizer():
    (value, details), _ = scored(Bleu, ZH, language="en", target="zh")  # English speech translated to Chinese
    expected = sacrebleu.corpus_bleu([h for h, _ in ZH], [[r for _, r in ZH]], tokenize="zh")
    assert details["tokenizer"] == "zh" and value == expected.score
    (_, details), _ = scored(Bleu, ZH, language="th")
    assert details["tokenizer"] == "char"


@pytest.mark.parametrize("code,language,module", [("ja", "Japanese", "tokenizer_ja_mecab"), ("ko", "Korean", "tokenizer_ko_mecab")])
def test_bleu_without_mecab_refuses_at_start_instead_of_changing_tokenizer(monkeypatch, code, language, module):
    import importlib

    monkeypatch.setattr(importlib.import_module(f"sacrebleu.tokenizers.{module}"), "MeCab", None)  # as when not installed
    spec = DatasetSpec(hf_repo="x", language="en", target_language=code)
    dataset = Dataset(f"covost_en_{code}", "c", "t", spec, Path("runspecs/st.json"))
    expected = rf"runspecs/st.json: dataset 'covost_en_{code}': metric 'bleu' tokenizes {language} with MeCab .*pip install 'sacrebleu\[{code}\]'"
    with pytest.raises(UserError, match=expected):
        Bleu.check_dataset(dataset)


def test_japanese_bleu_uses_mecab_when_installed():
    (value, details), _ = scored(Bleu, [("今日は良い天気です", "今日はいい天気です")], target="ja")
    assert details["tokenizer"] == "ja-mecab" and "tok:ja-mecab" in details["signature"]
    assert value == sacrebleu.corpus_bleu(["今日は良い天気です"], [["今日はいい天気です"]], tokenize="ja-mecab").score


def test_chrf_equals_sacrebleu_exactly():
    (value, details), _ = scored(Chrf, EN)
    assert value == sacrebleu.corpus_chrf([h for h, _ in EN], [[r for _, r in EN]]).score
    assert details["signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0")


def test_rouge_equals_rouge_score_for_english():
    (value, details), _ = scored(Rouge, EN)
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    expected = [scorer.score(r, h) for h, r in EN]
    assert value == pytest.approx(100 * sum(e["rougeL"].fmeasure for e in expected) / len(EN))
    assert details["rouge1"] == pytest.approx(100 * sum(e["rouge1"].fmeasure for e in expected) / len(EN))
    assert details["tokenizer"] == "rouge-score default, Porter stemmer"


def test_rouge_uses_the_datasets_normalizer_outside_english():
    (value, details), items = scored(Rouge, [("今天天氣很好", "今天天气很好。")], language="zh")
    assert value == pytest.approx(100.0) and details["tokenizer"] == "normalizer chinese, unit mixed"


def test_empty_references_are_excluded_not_zero():
    (value, details), items = scored(Bleu, EN[2:3] + [("anything", "")])
    assert value == pytest.approx(100.0) and details["scored"] == 1 and items[1]["reason"] == "empty reference"


def test_resampled_sums_draw_samples_with_replacement():
    values = np.arange(10, dtype=float)[:, None]
    sums = resampled_sums(np.hstack([values, np.ones_like(values)]), 500, seed=5)
    assert np.all(sums[:, 1] == 10)  # each resample has as many samples as the data
    assert sums[:, 0].min() < 45 < sums[:, 0].max() and np.all(sums[:, 0] == np.rint(sums[:, 0]))


def config():
    return parse_config({"dataset_metric": [["x", "meteor"]], "models": [{"name": "m", "url": "http://127.0.0.1:8000/v1", "model": "m"}]}, "c.yaml")


def test_meteor_without_wordnet_refuses_at_start(tmp_path, monkeypatch):
    monkeypatch.setenv("LALMEVAL_WORDNET_DIR", str(tmp_path))
    with pytest.raises(UserError, match="metric 'meteor' needs nltk and WordNet: .*apt-get install wordnet-base"):
        METRICS.get("meteor").check(config())


@pytest.mark.slow
def test_meteor_matches_wordnet_synonyms_with_debians_wordnet(monkeypatch):
    if not (DEBIAN_WORDNET / "data.noun").exists():
        if os.environ.get("LALMEVAL_REQUIRE_SYSTEM_PACKAGES"):
            pytest.fail("wordnet-base is required (LALMEVAL_REQUIRE_SYSTEM_PACKAGES is set) but not installed")
        pytest.skip("needs Debian's wordnet-base (apt-get install wordnet-base)")
    monkeypatch.delenv("LALMEVAL_WORDNET_DIR", raising=False)
    METRICS.get("meteor").check(config())
    (synonym, details), _ = scored(Meteor, [("he drove the auto home", "he drove the car home")])
    assert details["wordnet_version"] == "3.0" and details["tokenizer"] == "nltk NLTKWordTokenizer"
    (unrelated, _), _ = scored(Meteor, [("he drove the cow home", "he drove the car home")])
    from nltk.translate.meteor_score import meteor_score

    exact_only = 100 * meteor_score([["he", "drove", "the", "car", "home"]], ["he", "drove", "the", "auto", "home"], wordnet=_NoSynonyms())
    assert synonym > exact_only == pytest.approx(unrelated)


class _NoSynonyms:
    """A WordNet without any synset: METEOR then matches exact words and stems only."""

    def synsets(self, *args, **kwargs):
        return []


def test_bertscore_without_the_package_refuses_at_start(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bert_score" else real(name, *a))
    with pytest.raises(UserError, match="metric 'bertscore' needs the bert-score package"):
        METRICS.get("bertscore").check(config())
