"""Careful reading on held-out replies (tests/data/replies_heldout): the done-when criteria of docs/reading.md, with default settings."""

import json
from pathlib import Path

import pytest

from lalmeval.catalog.runspecs import Dataset, DatasetSpec
from lalmeval.metrics.accuracy import Accuracy
from lalmeval.metrics.bleu import Bleu
from lalmeval.metrics.wer import WordErrorRate
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.postprocess.reading import read_transcript, without_tags
from lalmeval.results.records import Record

HELDOUT = Path(__file__).parent / "data" / "replies_heldout"


def load(name):
    return [json.loads(line) for line in (HELDOUT / name).read_text(encoding="utf-8").splitlines() if line.strip()]


EN, ZH, TRANSLATIONS, LABELS = (load(n) for n in ("transcripts_en.jsonl", "transcripts_zh.jsonl", "translations.jsonl", "labels.jsonl"))


def dataset(language="en", **spec):
    """A runspec as the catalog writes one: GeneralPostprocessor, no reading key."""
    return Dataset("d", "c", "t", DatasetSpec(hf_repo="x", language=language, postprocessor="GeneralPostprocessor", **spec), Path("x.json"))


def rec(reference, reply, **extra):
    return Record(id="i", prompt="", system=None, params={}, reference=reference,
                  prediction=GeneralPostprocessor().process(reply), extra=extra)


def wer_pairs(cases, language):
    """Per sample: (what default reading scores, what the grader's reading scores, as it is), and the metric."""
    metric = WordErrorRate(dataset(language), GeneralPostprocessor())
    grader = WordErrorRate(dataset(language, reading="verbatim"), GeneralPostprocessor())
    return metric, [(metric.score_record(rec(c["reference"], c["reply"])), grader.score_record(rec(c["reference"], c["grader"])))
                    for c in cases]


def bleu_pairs(cases, target):
    source = "de" if target == "en" else "en"
    metric = Bleu(dataset(source, target_language=target), GeneralPostprocessor())
    grader = Bleu(dataset(source, target_language=target, reading="verbatim"), GeneralPostprocessor())
    chosen = [c for c in cases if c["target"] == target]
    return metric, [(metric.score_record(rec(c["reference"], c["reply"])), grader.score_record(rec(c["reference"], c["grader"])))
                    for c in chosen]


def label_score(case, reply):
    if case["choices"]:
        metric = Accuracy(dataset(choices=case["choices"], target_column="answer"), GeneralPostprocessor())
        return metric.score_record(rec(case["reference"], reply, options=case["choices"], gold=case["choices"].index(case["reference"])))
    return Accuracy(dataset(), GeneralPostprocessor()).score_record(rec(case["reference"], reply))


def grader_label_score(case):
    return 1.0 if case["grader"] == case["reference"] else 0.0


def all_pairs():
    """Every held-out sample as (style, default score, grader score, higher is better)."""
    out = []
    for cases, language in ((EN, "en"), (ZH, "zh")):
        out += [(c["style"], -a["errors"], -b["errors"]) for c, (a, b) in zip(cases, wer_pairs(cases, language)[1])]
    for target in ("en", "zh"):
        cases = [c for c in TRANSLATIONS if c["target"] == target]
        out += [(c["style"], a["score"], b["score"]) for c, (a, b) in zip(cases, bleu_pairs(TRANSLATIONS, target)[1])]
    out += [(c["style"], label_score(c, c["reply"])["score"], grader_label_score(c)) for c in LABELS]
    return out


def test_the_heldout_set_covers_every_style_and_trap_the_criteria_name():
    assert len(EN) >= 80 and len(ZH) >= 30 and len(TRANSLATIONS) >= 20 and len(LABELS) >= 60
    assert {"emotion", "gender", "vocal_sound", "acoustic_scene", "sound_event", "language_id", "speaker_count"} <= {c["task"] for c in LABELS}
    assert {"qwen2_audio", "qwen25_omni", "qwen3_asr", "gemma3n", "canary_qwen", "markdown", "hedged", "refusal", "trap"} <= {c["style"] for c in EN}
    assert sum(c["style"] == "trap" for c in EN) >= 20 and sum(c["style"] == "label_trap" for c in LABELS) >= 10
    assert all(c["source"].strip() for c in EN + ZH + TRANSLATIONS + LABELS)


@pytest.mark.parametrize("cases,language", [(EN, "en"), (ZH, "zh")], ids=["english", "mandarin"])
def test_heldout_corpus_error_rates_come_within_a_point_and_a_half_of_the_grader(cases, language):
    metric, pairs = wer_pairs(cases, language)
    careful = metric.aggregate([a for a, _ in pairs])[0]
    grader = metric.aggregate([b for _, b in pairs])[0]
    verbatim_metric = WordErrorRate(dataset(language, reading="verbatim"), GeneralPostprocessor())
    verbatim = verbatim_metric.aggregate([verbatim_metric.score_record(rec(c["reference"], c["reply"])) for c in cases])[0]
    assert abs(careful - grader) <= 1.5, (careful, grader)
    assert verbatim > grader + 20  # the set is hard: unread, the wrapping is what gets scored


def test_at_most_five_percent_of_heldout_samples_are_scored_differently_from_the_grader():
    pairs = all_pairs()
    different = [(style, ours, grader) for style, ours, grader in pairs if ours != pytest.approx(grader)]
    assert len(pairs) >= 190
    assert len(different) <= 0.05 * len(pairs), different


def test_no_heldout_sample_is_scored_better_than_the_grader_scores_it():
    better = [(style, ours, grader) for style, ours, grader in all_pairs() if ours > grader + 1e-9]
    assert better == []


@pytest.mark.parametrize("case", EN + ZH + TRANSLATIONS, ids=lambda c: f"{c['style']}-{c['reply'][:24]}")
def test_what_is_read_from_a_heldout_reply_is_one_span_of_it(case):
    reply = GeneralPostprocessor().process(case["reply"])
    read = read_transcript(reply, "translation" if "target" in case else "transcript", case.get("target"))
    assert read.text in without_tags(case["reply"])[0]  # a span of what the model wrote, not only of the postprocessed reply


@pytest.mark.parametrize("case", [c for c in EN + ZH if c["style"] == "trap"], ids=lambda c: c["reply"][:30])
def test_heldout_traps_are_left_whole(case):
    reply = GeneralPostprocessor().process(case["reply"])
    assert read_transcript(reply).rules == ()


@pytest.mark.parametrize("target", ["en", "zh"])
def test_heldout_translations_score_as_the_grader_reads_them(target):
    metric, pairs = bleu_pairs(TRANSLATIONS, target)
    careful = metric.aggregate([a for a, _ in pairs])[0]
    grader = metric.aggregate([b for _, b in pairs])[0]
    assert careful <= grader + 1e-9 and grader - careful < 5.0, (careful, grader)


def test_heldout_labels_score_as_the_grader_reads_them_task_by_task():
    for task in sorted({c["task"] for c in LABELS}):
        cases = [c for c in LABELS if c["task"] == task]
        ours = [label_score(c, c["reply"])["score"] for c in cases]
        assert ours == [grader_label_score(c) for c in cases], task


def test_multiple_choice_on_heldout_label_sets_reads_a_stated_letter_whatever_the_reading():
    """A letter answer keeps its score, and fixed-choice label sets read it the same careful or verbatim."""
    for case in [c for c in LABELS if c["choices"]]:
        gold = case["choices"].index(case["reference"])
        for reply in (f"({'ABCDEFGHIJKLMNOP'[gold]})", f"The answer is {'ABCDEFGHIJKLMNOP'[gold]}."):
            scores = {mode: Accuracy(dataset(choices=case["choices"], target_column="answer", reading=mode), GeneralPostprocessor())
                      .score_record(rec(case["reference"], reply, options=case["choices"], gold=gold))["score"]
                      for mode in ("careful", "verbatim")}
            assert scores == {"careful": 1.0, "verbatim": 1.0}, (reply, case["choices"])
