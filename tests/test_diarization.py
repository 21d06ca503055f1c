"""speaker_diarization: label parsing, cpWER as meeteval counts it (tests/test_cpwer.py), WDER and speaker count as DiarizationLM defines them."""

import json
from pathlib import Path

import pytest
from whisper_normalizer.english import EnglishTextNormalizer

from lalmeval.catalog.runspecs import Dataset, DatasetSpec
from lalmeval.data.callhome import read_callhome
from lalmeval.metrics import METRICS
from lalmeval.metrics.cpwer import cp_word_errors
from lalmeval.metrics.diarization import SpeakerDiarization, align, parse_speakers
from lalmeval.metrics.wer import WordErrorRate
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.results.records import Record

normalize_english = EnglishTextNormalizer()

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "callhome"


def metric(cls=SpeakerDiarization, language="english"):
    return cls(Dataset("callhome", "c", "t", DatasetSpec(hf_repo="x", language=language), Path("x.json")), GeneralPostprocessor())


def run(pairs, language="english"):
    m = metric(language=language)
    items = [m.score_record(Record(id=str(n), prompt="", system=None, params={}, reference=r, prediction=p)) for n, (r, p) in enumerate(pairs)]
    value, details = m.aggregate(items)
    return value, details, items


@pytest.mark.parametrize("line", [
    "A: hello there", "Speaker A: hello there", "speaker a: hello there", "**A:** hello there", "**A**: hello there",
    "[A] hello there", "[A]: hello there", "A： hello there", "   A:   hello there   ", "- A: hello there", "__Speaker A__: hello there",
])
def test_label_forms_are_tolerated(line):
    assert parse_speakers(line) == [("A", "hello there")]


def test_numbered_labels_name_one_speaker_however_written():
    assert {s for s, _ in parse_speakers("SPEAKER_01: a\nSpeaker 1: b\nspk1: c\n1: d")} == {"1"}


def test_blank_lines_are_ignored_and_unlabelled_lines_continue_the_speaker():
    assert parse_speakers("A: one\n\n  \ntwo\nB: three\n") == [("A", "one"), ("A", "two"), ("B", "three")]


def test_text_before_the_first_label_is_a_speaker_of_its_own():
    assert parse_speakers("Here is the transcript:\nA: hi") == [("?", "Here is the transcript:"), ("A", "hi")]


def test_a_time_at_the_start_of_a_line_is_not_a_label():
    assert parse_speakers("A: we met at\n10:30 sharp") == [("A", "we met at"), ("A", "10:30 sharp")]


@pytest.mark.parametrize("labels", [("Caller", "Agent"), ("1", "2"), ("John", "Mary"), ("SPEAKER_00", "SPEAKER_01"),
                                    ("Customer Service", "Dr. Smith"), ("speaker b", "Speaker A"), ("Interviewer (Anne)", "Guest #2")])
def test_any_label_names_are_mapped_to_the_reference_speakers_and_never_scored_as_words(labels):
    reference = "A: hello how are you\nB: fine thanks and you\nA: very well"
    first, second = labels
    prediction = f"{first}: hello how are you\n{second}: fine thanks and you\n{first}: very well"
    value, details, (item,) = run([(reference, prediction)])
    assert value == 0 and details["wder"] == 0 and item["speaker_count_error"] == 0
    (hyp_first, _), (hyp_second, _) = parse_speakers(prediction)[:2]
    assert sorted(map(tuple, item["assignment"])) == [("A", hyp_first), ("B", hyp_second)]


@pytest.mark.parametrize("prediction", [
    "Caller: hello how are you. Agent: fine thanks and you. Caller: very well",
    "**Caller:** hello how are you **Agent:** fine thanks and you **Caller:** very well",
    "Speaker 1: hello how are you Speaker 2: fine thanks and you Speaker 1: very well",
    "Caller: hello how are you\nAgent: fine thanks and you Caller: very well",
])
def test_labels_inside_one_line_start_new_turns(prediction):
    value, details, _ = run([("A: hello how are you\nB: fine thanks and you\nA: very well", prediction)])
    assert value == 0 and details["wder"] == 0


def test_a_role_labelled_perfect_answer_scores_zero_where_labels_read_as_words_scored_150_percent():
    reference = "A: yes\nB: no"
    assert run([(reference, "Caller: yes\nAgent: no")])[0] == 0
    assert run([(reference, "yes\nno")])[0] > 0  # unlabelled lines are one speaker: the score does see speakers


def test_a_colon_inside_a_sentence_or_a_time_or_an_address_is_not_a_label():
    assert parse_speakers("A: see http://example.com at 10:30\nB: the ratio was 3:1") == [
        ("A", "see http://example.com at 10:30"), ("B", "the ratio was 3:1")]
    assert parse_speakers("Here is what the two of them said:\nA: hi") == [("?", "Here is what the two of them said:"), ("A", "hi")]


# DiarizationLM's worked examples (diarizationlm/metrics_test.py in github.com/google/speaker-id),
# written as speaker-attributed transcripts: speaker numbers become line labels.
SAME_WORDS = ("2: Hello. Good morning, how\n1: are you?", "1: hello good morning\n2: how are you")
DIFF_WORDS = ("2: a bb c e\n3: f gg\n4: g\n3: h\n2: ii", "1: a b c\n2: d e f\n3: g\n2: h")


def test_wder_and_cpwer_match_diarizationlm_worked_examples():
    _, _, (same, diff) = run([SAME_WORDS, DIFF_WORDS])
    # the hypothesis gives "how" to the wrong speaker: one of six aligned words, one deletion + one insertion
    assert (same["wder_errors"], same["wder_words"]) == (1, 6)
    assert (same["insertions"], same["deletions"], same["substitutions"], same["ref_words"]) == (1, 1, 0, 6)
    # bb/b matched as a substitution, g attributed to the wrong speaker: one of seven aligned words
    assert (diff["wder_errors"], diff["wder_words"]) == (1, 7)
    assert (diff["insertions"], diff["deletions"], diff["substitutions"], diff["ref_words"]) == (1, 2, 3, 9)
    assert same["speaker_count_error"] == diff["speaker_count_error"] == 0


def test_corpus_wder_and_cpwer_sum_over_windows_as_diarizationlm_reports():
    value, details, _ = run([SAME_WORDS, DIFF_WORDS])
    assert details["wder"] == pytest.approx(2 / 13)  # DiarizationLM: WDER 0.1538
    assert details["cpwer"] == pytest.approx(8 / 15)  # DiarizationLM: cpWER 0.5333
    assert value == pytest.approx(100 * 8 / 15)


def test_alignment_breaks_ties_as_diarizationlm_does():
    # "x y" vs "y x": two substitutions cost as much as a deletion and an insertion around the match;
    # DiarizationLM prefers the insertion, so one pair is aligned, not two.
    assert align(["x", "y"], ["y", "x"]) == [(0, -1), (1, 0), (-1, 1)]
    assert align(["a", "b", "c"], ["a", "x", "c"]) == [(0, 0), (1, 1), (2, 2)]
    assert align([], ["a"]) == [(-1, 0)] and align(["a"], []) == [(0, -1)]


def test_speaker_count_error_is_signed_per_window_and_mean_absolute_overall():
    # DiarizationLM's example: hypothesis speakers 1 2 2 2, reference 1 2 2 3 → one speaker too few
    _, details, items = run([("1: a\n2: b c\n3: d", "1: a\n2: b c d"), ("A: x y", "A: x\nB: y\nC: z")])
    assert [x["speaker_count_error"] for x in items] == [-1, 2]
    assert details["speaker_count_error"] == pytest.approx(1.5)


def test_corpus_cpwer_is_the_sum_of_each_window_s_cpwer_counts_on_whole_call_windows():
    _, rows = read_callhome(FIXTURE, "turns", window_s=1e9)
    rows = list(rows)
    spoken = json.loads((FIXTURE / "spoken.json").read_text(encoding="utf-8"))
    # Predictions: what was said (fillers, "Ben", the fragment "ch"), labels renamed and swapped,
    # one utterance given to the other speaker and one left out.
    predictions, references, hypotheses = [], [], []
    for row in rows:
        said = [u for u in spoken[row["call"]] if u["reference"]]
        labels = [("Speaker 2" if u["speaker"] == "A" else "Speaker 1") for u in said]
        labels[2] = "Speaker 1" if labels[2] == "Speaker 2" else "Speaker 2"
        lines = [f"{label}: {u['said']}" for label, u in zip(labels, said)]
        if row["call"] == "5002":
            lines = lines[:-1]
        predictions.append("\n".join(lines))
        ref, hyp = {}, {}
        for u in said:
            ref.setdefault(u["speaker"], []).append(normalize_english(u["reference"]))
        for line in lines:
            label, text = line.split(": ", 1)
            hyp.setdefault(label, []).append(normalize_english(text))
        references.append({k: " ".join(v) for k, v in ref.items()})
        hypotheses.append({k: " ".join(v) for k, v in hyp.items()})
    value, details, items = run(list(zip([r["reference"] for r in rows], predictions)))
    direct = [cp_word_errors({k: v.split() for k, v in r.items()}, {k: v.split() for k, v in h.items()}) for r, h in zip(references, hypotheses)]
    assert abs(value - 100 * sum(d.errors for d in direct) / sum(d.length for d in direct)) < 1e-9
    assert [x["errors"] for x in items] == [d.errors for d in direct]
    assert value > 0 and details["wder"] > 0


def test_relabelling_the_hypothesis_changes_nothing():
    reference = "A: hello there how are you\nB: fine thanks and you\nA: good"
    base = run([(reference, "X: hello there how are\nY: you fine thanks and you\nX: good")])
    swapped = run([(reference, "**Speaker 7:** hello there how are\n**Speaker 3:** you fine thanks and you\n**Speaker 7:** good")])
    assert base[0] == swapped[0] and base[1]["wder"] == swapped[1]["wder"] == pytest.approx(1 / 10)


def test_a_one_speaker_window_scores_its_word_error_rate():
    reference, prediction = "A: Set a timer for twenty-five minutes, please.", "A: set the timer for 25 minutes"
    value, _, _ = run([(reference, prediction)])
    wer = metric(WordErrorRate)
    item = wer.score_record(Record(id="0", prompt="", system=None, params={}, reference=reference[3:], prediction=prediction[3:]))
    assert value == pytest.approx(wer.aggregate([item])[0])


def test_empty_prediction_deletes_every_reference_word():
    value, details, items = run([("A: hello there\nB: friend", "")])
    assert value == pytest.approx(100.0) and items[0]["deletions"] == 3 and items[0]["speaker_count_error"] == -2
    assert items[0]["wder"] is None and details["wder"] is None


def test_a_window_whose_reference_normalizes_to_nothing_is_unscored_not_counted():
    value, details, items = run([("A: [laughter]", "A: ha ha"), ("A: hello there", "A: hello there")])
    assert items[0] == {"score": None, "reason": "empty reference after normalization"}
    assert value == pytest.approx(0.0) and details["insertions"] == 0 and details["windows"] == 1


def test_unspaced_scripts_are_scored_by_characters():
    _, _, (item,) = run([("A: 你好世界\nB: 谢谢", "1: 你好世\n2: 谢谢")], language="chinese")
    assert (item["ref_words"], item["errors"]) == (6, 1)


def test_metric_is_registered_by_name():
    assert METRICS.get("speaker_diarization") is SpeakerDiarization
