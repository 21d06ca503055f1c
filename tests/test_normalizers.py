"""Normalizers and error units: Whisper's English rules, the Chinese convention, mixed error rates."""

from pathlib import Path

import re

import pytest

from lalmeval.metrics.normalize import NORMALIZERS, normalizer, split_units
from lalmeval.metrics.wer import WordErrorRate
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.results.records import Record
from lalmeval.catalog.runspecs import Dataset, DatasetSpec


def wer_metric(language="en", **spec):
    return WordErrorRate(Dataset("d", "c", "t", DatasetSpec(hf_repo="x", language=language, **spec), Path("x.json")), GeneralPostprocessor())


def corpus(pairs, language="en", **spec):
    """details of word_error_rate over (reference, prediction) pairs."""
    metric = wer_metric(language, **spec)
    items = [metric.score_record(Record(id=str(i), prompt="", system=None, params={}, reference=r, prediction=p)) for i, (r, p) in enumerate(pairs)]
    return metric.aggregate(items)[1]


def english():
    """The normalizer word_error_rate applies to English: the code path under test."""
    return normalizer(wer_metric("english").normalizer_name)


# openai/whisper tests/test_normalizer.py: test_number_normalizer runs every case through
# EnglishTextNormalizer too, test_spelling_normalizer's cases hold for it as well.
WHISPER_CASES = [
    ("two", "2"), ("thirty one", "31"), ("five twenty four", "524"), ("nineteen ninety nine", "1999"),
    ("twenty nineteen", "2019"), ("two point five million", "2500000"), ("four point two billions", "4200000000s"),
    ("200 thousand", "200000"), ("200 thousand dollars", "$200000"), ("$20 million", "$20000000"),
    ("€52.4 million", "€52400000"), ("£77 thousands", "£77000s"), ("two double o eight", "2008"),
    ("three thousand twenty nine", "3029"), ("forty three thousand two hundred sixty", "43260"),
    ("forty three thousand two hundred and sixty", "43260"), ("nineteen fifties", "1950s"), ("thirty first", "31st"),
    ("thirty three thousand and three hundred and thirty third", "33333rd"), ("three billion", "3000000000"),
    ("millions", "1000000s"), ("july third twenty twenty", "july 3rd 2020"),
    ("august twenty sixth twenty twenty one", "august 26th 2021"), ("3 14", "3 14"), ("3.14", "3.14"),
    ("3 point 2", "3.2"), ("3 point 14", "3.14"), ("fourteen point 4", "14.4"), ("two point two five dollars", "$2.25"),
    ("two hundred million dollars", "$200000000"), ("$20.1 million", "$20100000"), ("ninety percent", "90%"),
    ("seventy six per cent", "76%"), ("double oh seven", "007"), ("double zero seven", "007"), ("nine one one", "911"),
    ("nine double one", "911"), ("one triple oh one", "10001"), ("two thousandth", "2000th"),
    ("thirty two thousandth", "32000th"), ("minus 500", "-500"), ("positive twenty thousand", "+20000"),
    ("two dollars and seventy cents", "$2.70"), ("3 cents", "¢3"), ("$0.36", "¢36"),
    ("three euros and sixty five cents", "€3.65"), ("three and a half million", "3500000"),
    ("forty eight and a half dollars", "$48.5"), ("b747", "b 747"), ("10 th", "10th"), ("10th", "10th"),
    ("mobilisation", "mobilization"), ("cancelation", "cancellation"),
    ("Let's", "let us"), ("he's like", "he is like"), ("she's been like", "she has been like"), ("10km", "10 km"),
    ("10mm", "10 mm"), ("RC232", "rc 232"),
    ("Mr. Park visited Assoc. Prof. Kim Jr.", "mister park visited associate professor kim junior"),
]


@pytest.mark.parametrize("text,expected", WHISPER_CASES)
def test_whispers_own_normalizer_cases_pass_through_the_wer_normalizer(text, expected):
    assert english()(text) == expected


def test_english_defaults_to_whispers_normalizer_by_name():
    assert wer_metric("english").normalizer_name == "whisper_english"
    assert corpus([("Mr. Smith paid $20 million.", "mister smith paid twenty million dollars")])["corpus_wer"] == 0.0


def test_normalizer_none_compares_texts_as_written():
    details = corpus([("Hello, World", "hello world")], normalizer="none")
    assert details["normalizer"] == "none" and details["corpus_wer"] == pytest.approx(1.0)
    assert corpus([("Hello, World", "hello world")])["corpus_wer"] == 0.0


def test_normalizer_registry_names_the_closest_name():
    from lalmeval.errors import UserError

    with pytest.raises(UserError, match="unknown normalizer 'whisper_englsh' \\(did you mean 'whisper_english'\\?\\)"):
        NORMALIZERS.get("whisper_englsh")
    assert {"whisper_english", "whisper_basic", "basic", "chinese", "none"} <= set(NORMALIZERS.names())


# --- Chinese and Cantonese -------------------------------------------------------------------

def test_traditional_and_simplified_chinese_score_zero_errors():
    details = corpus([("我們一起去學校，這個軟體很好用。", "我们一起去学校这个软体很好用")], language="chinese")
    assert details["normalizer"] == "chinese" and details["corpus_wer"] == 0.0


def test_cantonese_traditional_and_simplified_score_zero_errors():
    assert corpus([("佢哋喺度食緊飯", "佢哋喺度食紧饭")], language="cantonese")["corpus_wer"] == 0.0


def test_full_width_forms_fold_to_half_width():
    chinese = normalizer("chinese")
    assert chinese("ＡＢＣ１２３，") == chinese("abc123")
    assert corpus([("我有ＩＰＨＯＮＥ１５", "我有iPhone 15")], language="zh")["corpus_wer"] == 0.0


@pytest.mark.parametrize("written,spoken", [
    ("2024年5月", "二零二四年五月"),          # a year before 年: digit by digit
    ("二〇二四年", "二零二四年"),              # 〇 and 零 are one numeral
    ("3.5公斤", "三点五公斤"),                 # decimals
    ("50%的人", "百分之五十的人"),            # percent
    ("120个人", "一百二十个人"),              # cardinals
    ("200块", "两百块"),                      # 两 and 二 are one numeral
    ("2个人", "两个人"),
    ("1,000元", "一千元"),                    # digit grouping
    ("电话13800138000", "电话一三八零零一三八零零零"),  # long digit strings: digit by digit
])
def test_chinese_numerals_written_and_spoken_score_zero_errors(written, spoken):
    assert corpus([(written, spoken)], language="zh")["corpus_wer"] == 0.0


def test_words_with_numeral_characters_are_not_turned_into_digits():
    chinese = normalizer("chinese")
    assert chinese("我们一起去，统一，万一下雨") == "我们一起去 统一 万一下雨"
    # Digits become characters, never the reverse; a different character is still an error.
    assert corpus([("我们一起去", "我们七起去")], language="zh")["corpus_wer"] == pytest.approx(1 / 5)


def test_code_switched_chinese_is_a_mixed_error_rate():
    details = corpus([("我们用Python写代码", "我们用Java写代码")], language="zh")
    # tokens: 我 们 用 python 写 代 码 — seven, one substituted
    assert details["unit"] == "mixed" and details["reference_tokens"] == 7 and details["corpus_wer"] == pytest.approx(1 / 7)
    assert split_units("用python写code", "mixed") == ["用", "python", "写", "code"]


# --- error units -----------------------------------------------------------------------------

def test_error_unit_override_counts_characters_or_words():
    pair = [("the cat sat", "the bat sat")]
    assert corpus(pair)["corpus_wer"] == pytest.approx(1 / 3)
    assert corpus(pair, error_unit="character")["corpus_wer"] == pytest.approx(1 / 9)
    assert corpus([("今天 天气", "今天 天汽")], language="ja", error_unit="word")["corpus_wer"] == pytest.approx(1 / 2)


@pytest.mark.parametrize("language,unit,name", [
    ("en", "word", "whisper_english"), ("fr", "word", "basic"), ("zh", "mixed", "chinese"), ("yue", "mixed", "chinese"),
    ("ja", "character", "basic"), ("ko", "character", "basic"), ("th", "character", "basic"),
])
def test_language_defaults(language, unit, name):
    metric = wer_metric(language)
    assert (metric.unit, metric.normalizer_name) == (unit, name)


def test_a_missing_normalizer_package_stops_the_run_at_start(monkeypatch):
    from lalmeval.errors import UserError
    from lalmeval.metrics.normalize import Normalizer

    class NeedsMissing(Normalizer):
        def __init__(self):
            import lalmeval_missing_package  # noqa: F401

    monkeypatch.setitem(NORMALIZERS._items, "needs_missing", NeedsMissing)
    metric = wer_metric(normalizer="needs_missing")
    with pytest.raises(UserError, match="x.json: dataset 'd': normalizer 'needs_missing' needs the 'lalmeval_missing_package' package"):
        WordErrorRate.check_dataset(metric.dataset)


@pytest.mark.parametrize("code,expected", [("eng", "en"), ("cmn", "zh"), ("cmn_hans_cn", "zh"), ("jpn", "ja"), ("zho", "zh"),
                                           ("deu", "de"), ("yue", "yue"), ("fil", "fil")])
def test_three_letter_language_codes_are_the_languages_of_their_two_letter_codes(code, expected):
    """A runspec declaring `language: jpn` used to get English word units for Japanese."""
    from lalmeval.config.languages import default_error_unit, iso_code

    assert iso_code(code) == expected
    if expected == "ja":
        assert default_error_unit(iso_code(code)) == "character"


@pytest.mark.parametrize("code,fragment", [("cn", "'cn' is a country code: did you mean 'zh'?"), ("jp", "'jp' is a country code: did you mean 'ja'?"),
                                           ("xx", "not an ISO 639-1 code"), ("zz-ZZ", "not an ISO 639-1 code")])
def test_two_letters_that_are_no_language_are_refused_not_scored_with_another_normalizer(code, fragment):
    """'cn' taken as a code gave Chinese text the basic normalizer and word units: WER 100 instead of 12.5."""
    from lalmeval.errors import UserError
    from lalmeval.config.languages import iso_code

    with pytest.raises(UserError, match=re.escape(f"x.json: language: unknown language '{code}' ({fragment}")):
        iso_code(code, where="x.json: language")


@pytest.mark.parametrize("code,expected", [("kr", "kr"), ("se", "se"), ("jw", "jv"), ("iw", "he"), ("nn-NO", "nn"), ("tok", "tok")])
def test_every_iso_639_1_code_withdrawn_code_and_three_letter_code_is_a_language(code, expected):
    from lalmeval.config.languages import iso_code

    assert iso_code(code) == expected


def test_zero_width_separators_are_not_characters_of_a_character_error_rate():
    """Thai and Khmer texts separate words with U+200B; counted, a perfect answer without them scored errors."""
    from lalmeval.metrics.normalize import split_units

    assert split_units("សួស្តី\u200bពិភពលោក", "character") == split_units("សួស្តីពិភពលោក", "character")
