"""The strict verdict grammar on held-out judge replies: tests/data/judge_replies.jsonl holds replies as
GPT-4o, Claude, Qwen, Llama and others write them to lalmeval's prompts and to the published templates,
each with the rating a careful reader takes from it or the kind of failure it must be (for a template that
reads its verdict as its peer does, the rating the peer takes)."""

import json
from pathlib import Path

import pytest

from lalmeval.config.prompts import load_prompts
from lalmeval.errors import UserError
from lalmeval.judging.templates import BINARY_METRIC, GRADED_METRIC, resolve, shipped
from lalmeval.judging.verdicts import Labels, Scale, read_verdict

DATA = Path(__file__).parent / "data" / "judge_replies.jsonl"
CASES = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]


def verdict_of(name):
    """The verdict grammar a run uses for a template ('default:<metric>' is lalmeval's own for that metric)."""
    prompts = load_prompts()["judge_prompts"]
    name, _, metric = name.partition(":")
    for candidate in ([metric] if metric else [BINARY_METRIC, GRADED_METRIC]):
        try:
            return resolve(name, candidate, Path("."), prompts, "judge").verdict
        except UserError:
            continue
    raise AssertionError(f"no metric fits template {name}")


def test_the_held_out_set_is_large_and_covers_every_shipped_template():
    assert len(CASES) >= 150
    assert {c["template"] for c in CASES} >= set(shipped()) | {"default:llm_judge_binary", "default:llm_judge_detailed"}
    assert sum("fails" in c for c in CASES) >= 40 and len({c["judge"] for c in CASES}) >= 15


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['template']}-{c['judge']}" for i, c in enumerate(CASES)])
def test_judge_reply_is_read_as_labelled(case):
    reading = read_verdict(case["reply"], verdict_of(case["template"]))
    if "fails" in case:
        assert reading.value is None and reading.problem.split(":")[0] == case["fails"], reading
    else:
        assert (reading.value, reading.problem) == (case["rating"], None)


@pytest.mark.parametrize("reply,problem", [
    ("Rating: 4\nRating: 3", 'ambiguous judgment: two different ratings, "Rating: 4" and "Rating: 3"'),
    ("Rating (0-5):", 'unparseable judgment: "Rating (0-5):" holds no rating on the 0-5 scale'),
    ("Score: 9/10", 'rating on another scale: "Score: 9/10" (this judge rates 0-5)'),
    ("<think>Rating: 4 maybe", "unparseable judgment: the reasoning (<think>) never ended, so no verdict was given"),
])
def test_a_failure_names_what_was_wrong_and_quotes_it(reply, problem):
    assert read_verdict(reply, Scale(0, 5)).problem == problem


def test_a_final_or_labelled_statement_decides_over_prose_and_lone_lines():
    assert read_verdict("Rating: 3\nI could also see a 4.\nFinal rating: 4", Scale(0, 5)).value == 4
    assert read_verdict("The reference lists\n42\nRating: 5", Scale(0, 5)).value == 5
    assert read_verdict("Yes, the model names a dog, but the ground truth is a cat.\nResult: no", Labels({"yes": 1, "no": 0})).value == 0


YES_NO = {"yes": 1, "no": 0}


def test_kimis_last_line_reading_takes_yes_before_no_anywhere_in_the_last_line_only():
    verdict = Labels(YES_NO, read="last_line")
    assert read_verdict("Explanation: so the answer is correct, yes", verdict).value == 1
    assert read_verdict("Result: yes, not no", verdict).value == 1  # "yes" is looked for first
    assert read_verdict("Result: yes\nNote: the letter matches.", verdict).value == 0  # "note" holds "no", as Kimi reads it
    assert read_verdict("Result: yes\n\nThe model's output matches.", verdict).problem == \
        'unparseable judgment: the last line holds no yes or no: "The model\'s output matches."'


def test_lmms_sd_qa_reading_takes_only_a_reply_that_is_just_the_word():
    verdict = Labels(YES_NO, read="whole_reply")
    assert [read_verdict(r, verdict).value for r in ("Yes", " no\n", "YES")] == [1, 0, 1]
    assert read_verdict("Yes.", verdict).problem == 'unparseable judgment: the reply is not just yes or no: "Yes."'


def test_lmms_open_reading_takes_the_first_number_and_it_must_be_on_the_scale():
    verdict = Scale(1, 5, read="first_number")
    assert [read_verdict(r, verdict).value for r in ("4", "Rating: 3 out of 5", "Score (1-5): 4", "4.0")] == [4, 3, 1, 4]
    assert read_verdict("4.5", verdict).problem == 'rating not an integer: 4.5 in "4.5" (the scale is 1-5)'
    assert read_verdict("It deserves a 9", verdict).problem == 'rating outside the scale: 9 in "9" (the scale is 1-5)'
    assert read_verdict("Relevant and", verdict).problem.startswith("unparseable judgment: no number in the reply")


READABLE = [json.loads(line) for line in (Path(__file__).parent / "fixtures" / "judge_replies" / "readable_and_revised.jsonl")
            .read_text(encoding="utf-8").splitlines()]


def _verdict(spec: dict):
    return Scale(*spec["scale"]) if "scale" in spec else Labels(spec["labels"])


@pytest.mark.parametrize("case", READABLE, ids=[f"{i}-{c['kind'] or c['value']}" for i, c in enumerate(READABLE)])
def test_spelled_json_boolean_correctness_and_revised_verdicts_are_read_and_nothing_else_is(case):
    reading = read_verdict(case["reply"], _verdict(case["verdict"]))
    assert reading.value == case["value"], reading.problem
    if case["value"] is None:
        assert case["kind"] in reading.problem
    assert (reading.note is not None and reading.note.startswith("revised: ")) == (case["kind"] == "revised")
