import pytest

from lalmeval.catalog.runspecs import Dataset, DatasetSpec
from lalmeval.metrics.accuracy import Accuracy
from lalmeval.metrics.normalize import normalize_basic, normalizer
from lalmeval.metrics.wer import WordErrorRate
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.results.records import Record


def dataset(language="en"):
    from pathlib import Path

    return Dataset("d", "c", "t", DatasetSpec(hf_repo="x", language=language), Path("x.json"))


def rec(reference, prediction):
    return Record(id="i", prompt="", system=None, params={}, reference=reference, prediction=prediction)


def score(metric_cls, pairs, language="en"):
    metric = metric_cls(dataset(language), GeneralPostprocessor())
    items = [metric.score_record(rec(r, p)) for r, p in pairs]
    return metric.aggregate(items), items


def test_basic_normalizer_strips_punctuation_in_any_script():
    assert normalize_basic("Bonjour, le Monde ! (rire)") == "bonjour le monde"
    assert normalize_basic("你好，世界！") == "你好 世界"


def test_basic_normalizer_keeps_vowel_signs_that_whispers_drops():
    thai = "สวัสดีครับ"  # the marks above and below the consonants are vowels and tones
    assert normalize_basic(thai) == thai
    assert normalizer("whisper_basic")(thai) != thai


def test_corpus_wer_sums_edits_over_reference_words():
    (value, details), items = score(WordErrorRate, [("the cat sat", "the cat sat"), ("a b c d", "a x c")])
    assert details["corpus_wer"] == pytest.approx(2 / 7)  # 1 substitution + 1 deletion over 7 words
    assert value == pytest.approx(100 * 2 / 7)
    assert details["mean_sample_wer"] == pytest.approx((0 + 0.5) / 2)


def test_normalization_makes_formatting_differences_free():
    (value, _), _ = score(WordErrorRate, [("Set a timer for twenty-five minutes.", "set a timer for 25 minutes")])
    assert value == 0.0


def test_a_reference_empty_after_normalization_is_unscored_and_adds_nothing():
    """[NOISE] and a filler normalize to nothing: such a sample is not scored (it fails with its
    reason), and its insertions never reach the corpus rate — no 150 % WER from two noise tags."""
    (value, details), items = score(WordErrorRate, [("[NOISE] uh", "noise words"), ("", "more"), ("one word", "one word")])
    assert [x["score"] for x in items] == [None, None, 0.0]
    assert [x["reason"] for x in items[:2]] == ["empty reference after normalization", "empty reference"]
    assert value == 0.0 and details["corpus_wer"] == 0.0 and details["insertions"] == 0 and details["scored"] == 1
    (value, details), _ = score(WordErrorRate, [("", "")])
    assert value is None and details["corpus_wer"] is None


@pytest.mark.parametrize("language,unit", [("zh", "mixed"), ("yue", "mixed"), ("ja", "character"), ("ko", "character"), ("th", "character")])
def test_character_error_rate_for_unspaced_scripts(language, unit):
    (value, details), _ = score(WordErrorRate, [("今天 天气", "今天天汽")], language=language)
    assert details["unit"] == unit and details["corpus_wer"] == pytest.approx(1 / 4)


@pytest.mark.parametrize("reference,prediction,correct", [
    ("B", "(B)", True), ("B", "B.", True), ("B", "Answer: B", True), ("B", "The answer is (b).", True),
    ("B", "\\boxed{B}", True), ("B", "B) happy", True), ("B", "C", False), ("(C)", "c", True),
    ("Happy", "happy!", True), ("Happy", "sad", False), ("neutral", "Neutral.", True),
    # plain numbers compare as numbers: a CSV cell "3.0" (pandas writes integers so beside a gap) and the reply "3"
    ("3.0", "3", True), ("3", "3.00.", True), ("2.5", "2.50", True), ("3.0", "3.5", False), ("1e3", "1000", True),
    ("3.0", "three", False),
])
def test_accuracy_label_normalization(reference, prediction, correct):
    (value, _), _ = score(Accuracy, [(reference, prediction)])
    assert value == (100.0 if correct else 0.0)


def test_postprocessor_strips_reasoning_and_quotes():
    post = GeneralPostprocessor()
    assert post.process("<think>hmm, maybe B</think>\n  \"B\" ") == "B"
    assert post.process("reasoning without opening tag</think>final") == "final"
