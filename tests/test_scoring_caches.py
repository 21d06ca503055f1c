"""The caches of scoring (normalized tokens, careful readings, judge verdicts) give what uncached scoring gives, and stay bounded."""

import json
from pathlib import Path

import pytest

from lalmeval.judging import verdicts
from lalmeval.judging.verdicts import Labels, Scale, read_verdict
from lalmeval.metrics import normalize
from lalmeval.metrics.normalize import NORMALIZERS, UNITS, Normalizer, NotSupported, defused, normalizer, units_of
from lalmeval.postprocess import reading
from lalmeval.postprocess.reading import read_transcript
from tests.test_verdicts import CASES as JUDGE_CASES, verdict_of

REPLIES = Path(__file__).parent / "data" / "replies"
READING_CASES = [json.loads(line) for name in ("transcripts_en.jsonl", "transcripts_en_hard.jsonl", "transcripts_zh.jsonl", "translations.jsonl")
                 for line in (REPLIES / name).read_text(encoding="utf-8").splitlines() if line.strip()]
TEXTS = [c["reply"] for c in READING_CASES] + [c.get("reference") or "" for c in READING_CASES] + [
    "Mr. Smith paid $20 million in 1999.", "  ", "", "colour   centre", "二零一九年，我们去了北京。", "[[[" * 700]


def every_normalizer():
    """Each registered normalizer that this environment can build, for English and Chinese texts."""
    built = []
    for name in NORMALIZERS.names():
        for language in ("en", "zh"):
            try:
                built.append(normalizer(name, language))
            except (ImportError, NotSupported):
                continue
    return built


def test_cached_tokens_equal_uncached_tokens_for_every_normalizer_and_unit():
    rules_list = every_normalizer()
    assert len(rules_list) >= 8
    for rules in rules_list:
        for unit in UNITS:
            for text in TEXTS:
                uncached = rules.tokens(text if isinstance(rules, normalize.Identity) else defused(text), unit)
                assert units_of(rules, text, unit) == uncached
                assert units_of(rules, text, unit) == uncached  # the second call is answered by the cache


def test_cached_tokens_are_a_fresh_list_a_caller_may_change():
    rules = normalizer("basic")
    first = units_of(rules, "Hello there, world", "word")
    first.append("extra")
    assert units_of(rules, "Hello there, world", "word") == ["hello", "there", "world"]


def test_token_cache_stays_bounded_and_leaves_long_texts_out(monkeypatch):
    normalize._recent_units.cache_clear()
    rules = normalizer("none")
    for i in range(normalize.CACHED_TEXTS + 50):
        units_of(rules, f"text number {i}", "word")
    assert normalize._recent_units.cache_info().currsize == normalize.CACHED_TEXTS
    normalize._recent_units.cache_clear()
    long = "word " * (normalize.CACHED_CHARS // 5 + 1)
    assert units_of(rules, long, "word") == long.split()
    assert normalize._recent_units.cache_info().currsize == 0


def test_a_normalizer_that_is_not_pure_is_asked_every_time():
    class Counting(Normalizer):
        pure = False

        def __init__(self):
            super().__init__()
            self.calls = 0

        def __call__(self, text):
            self.calls += 1
            return f"{text} {self.calls}"

    rules = Counting()
    assert units_of(rules, "same text", "word") == ["same", "text", "1"]
    assert units_of(rules, "same text", "word") == ["same", "text", "2"]


@pytest.mark.parametrize("kind, target", [("transcript", None), ("translation", "en"), ("translation", "zh")])
def test_cached_readings_equal_uncached_readings(kind, target):
    for case in READING_CASES:
        uncached = reading._read(case["reply"], kind, target)
        assert read_transcript(case["reply"], kind, target) == uncached
        assert read_transcript(case["reply"], kind, target) == uncached


def test_reading_cache_stays_bounded_and_leaves_long_replies_out():
    reading._recent_reading.cache_clear()
    for i in range(reading.CACHED_READINGS + 50):
        read_transcript(f"Here is the transcription: number {i}")
    assert reading._recent_reading.cache_info().currsize == reading.CACHED_READINGS
    reading._recent_reading.cache_clear()
    long = "Here is the transcription: " + "go on " * reading.CACHED_CHARS
    assert read_transcript(long) == reading._read(long, "transcript", None)
    assert reading._recent_reading.cache_info().currsize == 0


def test_cached_verdicts_equal_uncached_verdicts_on_the_held_out_judge_replies():
    for case in JUDGE_CASES:
        verdict = verdict_of(case["template"])
        uncached = verdicts._read(case["reply"], verdict)
        assert read_verdict(case["reply"], verdict) == uncached
        assert read_verdict(case["reply"], verdict) == uncached


def test_verdict_cache_keeps_scales_apart_stays_bounded_and_reads_labels_uncached():
    verdicts._recent_verdict.cache_clear()
    assert read_verdict("Rating: 4", Scale(0, 5)).value == 4
    assert read_verdict("Rating: 4", Scale(0, 1)).problem is not None
    assert read_verdict("Rating: 4", Scale(0, 5, read="first_number")).value == 4
    assert read_verdict("Result: yes", Labels({"yes": 1, "no": 0})).value == 1
    assert verdicts._recent_verdict.cache_info().currsize == 3
    for i in range(verdicts.CACHED_READINGS + 50):
        read_verdict(f"Rating: {i % 6}. Reason {i}", Scale(0, 5))
    assert verdicts._recent_verdict.cache_info().currsize == verdicts.CACHED_READINGS
