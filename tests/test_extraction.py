"""Multiple-choice answer extraction: which option a free-form reply chose, or none."""

import json
import re
from pathlib import Path

import pytest

from lalmeval.data.choices import labels
from lalmeval.errors import UserError
from lalmeval.postprocess.extraction import EXTRACTORS, compile_pattern, extract_choice

CASES_FILE = Path(__file__).parent / "data" / "mc_answers.jsonl"
CASES = [json.loads(line) for line in CASES_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
ANIMALS = ["cat", "dog", "cow", "horse"]
ABCD = labels(4)


def run(name, reply, options=ANIMALS, pattern=None):
    return EXTRACTORS.get(name)(reply, options, labels(len(options)), pattern)


# --------------------------------------------------------------------------- the labelled set


@pytest.mark.parametrize("case", CASES, ids=[f"{i:03d}-{c['note']}" for i, c in enumerate(CASES)])
def test_default_reads_every_labelled_reply_like_a_careful_grader(case):
    assert run("default", case["reply"], case["options"]) == case["expected"], case["reply"]


def test_the_labelled_set_covers_what_default_promises():
    replies = [c["reply"] for c in CASES]
    assert len(CASES) >= 100
    for quoted in ("Option B is wrong, the answer is C.", "答案是C", "It equals 57, which is option B."):
        assert quoted in replies
    assert any(c["expected"] is not None and c["reply"].strip().lower() == c["options"][c["expected"]].lower() + "." for c in CASES)
    assert sum(c["expected"] is None for c in CASES) >= 20  # replies without a single answer
    assert sum(bool(re.search(r"[选为这个无应该综确觉]", c["reply"])) for c in CASES) >= 20  # simplified Chinese
    assert sum(bool(re.search(r"[選為這個認應該綜確後]", c["reply"])) for c in CASES) >= 15  # traditional Chinese
    assert sum(len(c["reply"]) > 150 for c in CASES) >= 5  # long reasoning
    assert all(c["expected"] is None or 0 <= c["expected"] < len(c["options"]) for c in CASES)


def test_a_reply_naming_every_option_chooses_none():
    assert run("default", "A cat, a dog, a cow and a horse could all make that sound.") is None
    assert run("default", "A, B, C or D.") is None


@pytest.mark.parametrize("letter", ABCD)
def test_default_follows_the_shown_letter_whatever_the_options(letter):
    shuffled = ["horse", "cow", "dog", "cat"]
    assert run("default", f"The answer is {letter}.", shuffled) == ABCD.index(letter)
    assert run("default", f"答案：{letter}", shuffled) == ABCD.index(letter)


# --------------------------------------------------------------------------- regex


def test_regex_takes_the_last_match():
    reply = "Answer: A. On reflection the clip barks. Answer: B."
    assert run("regex", reply, pattern=r"Answer: ([A-D])") == 1


def test_regex_capture_may_hold_an_option_text_or_a_lowercase_letter():
    assert run("regex", "Final: Dog", pattern=r"Final: (\w+)") == 1
    assert run("regex", "Final: (c)", pattern=r"Final: (\(?\w\)?)") == 2


def test_regex_uses_the_first_group_that_took_part():
    pattern = r"answer is ([A-D])|\\box\{([A-D])\}"
    assert run("regex", "I think \\box{D}", pattern=pattern) == 3


@pytest.mark.parametrize("reply", ["No answer here.", "Final: E", "Final: wolf"])
def test_regex_without_a_usable_match_is_none(reply):
    assert run("regex", reply, pattern=r"Final: (\w+)") is None


@pytest.mark.parametrize(
    "pattern, message",
    [(None, "needs a pattern"), ("Answer: [A-D]", "has no capture group"), ("Answer: ([A-D]", "is not a valid regex")],
)
def test_a_bad_regex_pattern_is_a_user_error(pattern, message):
    with pytest.raises(UserError, match=message):
        compile_pattern(pattern)
    with pytest.raises(UserError, match=message):
        run("regex", "Answer: B", pattern=pattern)


# --------------------------------------------------------------------------- box


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("\\box{C}", 2),
        ("\\boxed{B}", 1),
        ("\\\\boxed{D}", 3),  # a double backslash, as replies escaped once more carry it
        ("$\\boxed{\\text{(A)}}$", 0),
        ("\\boxed{B. dog}", 1),
        ("\\boxed{horse}", 3),
        ("\\boxed{A} at first, then \\boxed{C}", 2),
        ("\\boxed{C} then \\boxed{x + 1}", 2),
    ],
)
def test_box_reads_only_boxes_and_the_last_usable_one_wins(reply, expected):
    assert run("box", reply) == expected


@pytest.mark.parametrize("reply", ["The answer is B.", "\\boxed{E}", "\\boxed{A or B}", "\\boxed{B", ""])
def test_box_without_a_usable_box_is_none(reply):
    assert run("box", reply) is None


# --------------------------------------------------------------------------- first_letter


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("B", 1),
        ("The answer is C.", 2),
        ("答案是C", 2),
        ("Option B is wrong, the answer is C.", 1),  # first letter, even when negated: parity, not judgement
        ("A dog barks, so B.", 0),  # the article counts too
        ("Ｄ", 3),
        ("BAD idea; E and F are not options", None),
        ("b", None),  # capitals only
    ],
)
def test_first_letter_takes_the_first_standalone_capital_option_letter(reply, expected):
    assert run("first_letter", reply) == expected


# --------------------------------------------------------------------------- registry


def test_the_strategies_are_registered_by_name():
    assert EXTRACTORS.names() == ["box", "default", "first_letter", "listening_mcq", "mmmu", "mmmu_letters", "regex", "vocalsound"]


def test_extract_choice_runs_a_strategy_with_default_labels():
    assert extract_choice("default", "The answer is D.", ANIMALS) == 3
    assert extract_choice("regex", "pick=b", ANIMALS, pattern=r"pick=(\w)") == 1


def test_an_unknown_strategy_is_a_user_error_naming_where():
    with pytest.raises(UserError, match=r"runspec mmau: unknown answer extraction 'defualt' \(did you mean 'default'\?\)"):
        extract_choice("defualt", "B", ANIMALS, where="runspec mmau")


@pytest.mark.parametrize("name", ["default", "regex", "box", "first_letter"])
def test_labels_must_match_the_options(name):
    with pytest.raises(ValueError, match="one letter per option"):
        EXTRACTORS.get(name)("B", ANIMALS, ["A", "B"], r"(\w)")
