"""cpWER counted by lalmeval equals MeetEval's on every recorded case, without MeetEval installed."""

import json
from pathlib import Path

import pytest

from lalmeval.metrics.cpwer import cp_word_errors
from tests.fixtures.cpwer.make_meeteval_cases import cases

RECORDED = json.loads((Path(__file__).resolve().parent / "fixtures" / "cpwer" / "meeteval_cases.json").read_text(encoding="utf-8"))


def counts(reference, hypothesis):
    got = cp_word_errors(reference, hypothesis)
    return {"errors": got.errors, "length": got.length, "insertions": got.insertions, "deletions": got.deletions,
            "substitutions": got.substitutions, "missed_speaker": got.missed_speaker,
            "falarm_speaker": got.falarm_speaker, "assignment": [list(pair) for pair in got.assignment]}


def test_the_recorded_cases_are_the_generator_s_own():
    assert RECORDED["meeteval"] == "0.4.3"
    assert [{"reference": c["reference"], "hypothesis": c["hypothesis"]} for c in RECORDED["cases"]] == cases()


def test_every_count_and_the_assignment_equal_meeteval_on_600_generated_transcripts():
    differ = [(n, counts(c["reference"], c["hypothesis"]), c["meeteval"]) for n, c in enumerate(RECORDED["cases"])
              if counts(c["reference"], c["hypothesis"]) != c["meeteval"]]
    assert not differ, f"{len(differ)} cases differ from MeetEval, the first: {differ[0]}"


def test_the_cases_cover_what_diarization_meets():
    shapes = [(len(c["reference"]), len(c["hypothesis"])) for c in RECORDED["cases"]]
    assert any(r > h for r, h in shapes) and any(r < h for r, h in shapes) and any(r == h > 1 for r, h in shapes)
    assert any(r == 0 for r, _ in shapes) and any(h == 0 < r for r, h in shapes)
    swapped = [c for c in RECORDED["cases"] if any(r and h and r[1:] != h[1:] for r, h in c["meeteval"]["assignment"])]
    assert len(swapped) > 100  # speakers matched across names, not by position


@pytest.mark.parametrize("reference,hypothesis,expected", [
    # MeetEval's own examples (the docstring of meeteval.wer.cp_word_error_rate)
    ({"r0": ["a"], "r1": ["b"], "r2": ["c", "d"]}, {"h0": ["a"], "h1": ["b"]},
     {"errors": 2, "length": 4, "deletions": 2, "missed_speaker": 1, "assignment": (("r0", "h0"), ("r1", "h1"), ("r2", None))}),
    ({"r0": ["a"], "r1": ["b"], "r2": ["c"]}, {"h0": ["b"], "h1": ["c"], "h2": ["d"], "h3": ["a"]},
     {"errors": 1, "length": 3, "insertions": 1, "falarm_speaker": 1, "assignment": (("r0", "h3"), ("r1", "h0"), ("r2", "h1"), (None, "h2"))}),
    ({"r0": ["a", "b"]}, {"h0": ["z"], "h1": ["a", "e", "f"]},
     {"errors": 3, "length": 2, "insertions": 2, "substitutions": 1, "falarm_speaker": 1, "assignment": (("r0", "h1"), (None, "h0"))}),
    ({}, {}, {"errors": 0, "length": 0, "assignment": ()}),
    ({}, {"h0": ["a", "b"]}, {"errors": 2, "length": 0, "insertions": 2, "falarm_speaker": 1, "assignment": ((None, "h0"),)}),
], ids=["fewer hypothesis speakers", "more hypothesis speakers", "overestimation", "nothing", "empty reference"])
def test_meeteval_s_documented_examples(reference, hypothesis, expected):
    got = cp_word_errors(reference, hypothesis)
    defaults = {"insertions": 0, "deletions": 0, "substitutions": 0, "missed_speaker": 0, "falarm_speaker": 0}
    assert {key: getattr(got, key) for key in {**defaults, **expected}} == {**defaults, **expected}
