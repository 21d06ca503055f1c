"""Multiple-choice questions: options, the gold answer, seeded option order and the prompt."""

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from lalmeval.data import choices
from lalmeval.data.choices import apply, format_prompt, gold_index, labels, original_index, parse_options, permutation, remap_gold
from lalmeval.errors import UserError
from lalmeval.config.prompts import load_prompts

REPO = Path(__file__).resolve().parents[1]
ANIMALS = ["cat", "dog", "cow", "horse"]


# --------------------------------------------------------------------------- labels


def test_labels_are_capital_letters_in_order():
    assert labels(4) == ["A", "B", "C", "D"]
    assert labels(26)[-1] == "Z"
    assert labels(0) == []


@pytest.mark.parametrize("n", [27, -1])
def test_labels_beyond_the_alphabet_are_an_error(n):
    with pytest.raises(ValueError, match="0 to 26 options"):
        labels(n)


# --------------------------------------------------------------------------- parse_options


@pytest.mark.parametrize(
    "value, expected",
    [
        (["cat", "dog"], ["cat", "dog"]),
        (("cat", "dog"), ["cat", "dog"]),
        (np.array(["cat", "dog"]), ["cat", "dog"]),
        ('["School", "Hospital", "Park", "Museum"]', ["School", "Hospital", "Park", "Museum"]),
        ("['cat', \"dog's bark\"]", ["cat", "dog's bark"]),
        ([1, 2, 3], ["1", "2", "3"]),
        (["<image 1>", "<image 2>"], ["<image 1>", "<image 2>"]),
        ("(A) cat (B) dog", ["cat", "dog"]),
        ("A. cat\nB. dog\nC. cow", ["cat", "dog", "cow"]),
        ("A) cat; B) dog", ["cat", "dog"]),
        ("A: cat, B: dog", ["cat", "dog"]),
        ("(a) cat (b) dog", ["cat", "dog"]),
        ("[A] one [B] two [C] three", ["one", "two", "three"]),
        ("A、猫 B、狗", ["猫", "狗"]),
        ("（A）猫（B）狗", ["猫", "狗"]),
        (["A. cat", "B. dog"], ["cat", "dog"]),
        (["(A) cat", "(B) dog"], ["cat", "dog"]),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_parse_options_reads_lists_and_labelled_strings(value, expected):
    assert parse_options(value) == expected


def test_a_letter_inside_an_option_does_not_split_it():
    assert parse_options("(A) Plan B. Then stop (B) Plan C") == ["Plan B. Then stop", "Plan C"]


def test_list_items_keep_a_leading_letter_that_is_not_a_label_sequence():
    assert parse_options(["A. Lincoln", "Washington"]) == ["A. Lincoln", "Washington"]


@pytest.mark.parametrize(
    "value, message",
    [
        ("cat, dog", "expected a list"),
        ("[1, 2", "expected a list"),
        (42, "expected a list or a string"),
        ({"A": "cat"}, "expected a list or a string"),
        ([["cat"], ["dog"]], "must be a text or a number"),
        ([None, "dog"], "option A is empty"),
        (["cat"], "at least 2 options"),
        ("(A) cat", "at least 2 options"),
        (["cat", " "], "option B is empty"),
        ([str(i) for i in range(27)], "0 to 26 options"),
    ],
)
def test_parse_options_rejects_anything_else_with_a_clear_message(value, message):
    with pytest.raises(ValueError, match=message):
        parse_options(value)


# --------------------------------------------------------------------------- gold_index


@pytest.mark.parametrize(
    "target, expected",
    [
        ("B", 1), ("(B)", 1), ("b", 1), ("B.", 1), (" [c] ", 2),
        (1, 1), ("1", 1), (np.int64(2), 2), (3.0, 3),
        ("dog", 1), (" Dog. ", 1), ("HORSE", 3),
        ("(B) dog", 1), ("B. dog", 1), ("C) Cow", 2),
    ],
)
def test_gold_index_accepts_letters_indices_texts_and_labelled_texts(target, expected):
    assert gold_index(target, ANIMALS) == expected


def test_an_option_text_that_is_a_digit_wins_over_the_index():
    assert gold_index("1", ["1", "2", "3"]) == 0
    assert gold_index("1", ["10", "20", "30"]) == 1


def test_an_option_text_that_is_a_letter_wins_over_the_label():
    assert gold_index("A", ["B", "A"]) == 1


@pytest.mark.parametrize(
    "target, message",
    [
        ("E", r"'E' matches no option: not an option's text, not a letter A–D, not an index 0–3"),
        ("4", "not an index 0–3"),
        ("(B) cat", "not '\\(X\\) text' of an option"),
        (4, "index out of range"),
        (1.5, "whole 0-based index"),
        (None, "expected a letter"),
        ("  ", "expected a letter"),
    ],
)
def test_gold_index_names_what_it_tried(target, message):
    with pytest.raises(ValueError, match=message):
        gold_index(target, ANIMALS)


def test_a_gold_text_matching_two_options_is_an_error():
    with pytest.raises(ValueError, match="matches options A, B equally"):
        gold_index("dog", ["dog", "Dog.", "cat"])


# --------------------------------------------------------------------------- permutation


def test_permutation_is_a_permutation_and_deterministic():
    perm = permutation(7, 0, "sample-1", 5)
    assert sorted(perm) == list(range(5))
    assert permutation(7, 0, "sample-1", 5) == perm


def test_permutation_values_are_pinned():
    # These values must never change: a resumed or repeated run shows the same orders.
    assert permutation(0, 0, "sample-1", 4) == [2, 0, 1, 3]
    assert permutation(0, 1, "sample-1", 4) == [1, 2, 3, 0]
    assert permutation(42, 0, "mmau/0001", 10) == [4, 3, 8, 5, 7, 6, 2, 9, 1, 0]


def test_permutation_does_not_depend_on_the_process_hash_seed():
    code = "from lalmeval.data.choices import permutation; print(permutation(3, 2, 'id-9', 6))"
    outputs = {
        subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3")
    }
    assert outputs == {f"{permutation(3, 2, 'id-9', 6)}\n"}


def test_every_repeat_gets_a_new_order_until_all_orders_are_used():
    orders = [tuple(permutation(0, r, "s", 4)) for r in range(24)]
    assert len(set(orders)) == 24
    assert {tuple(permutation(1, r, "x", 2)) for r in (0, 1)} == {(0, 1), (1, 0)}
    assert {tuple(permutation(1, r, "x", 2)) for r in (2, 3)} == {(0, 1), (1, 0)}


def test_permutation_differs_between_samples_and_seeds():
    by_sample = {tuple(permutation(0, 0, f"s{i}", 6)) for i in range(50)}
    by_seed = {tuple(permutation(s, 0, "s", 6)) for s in range(50)}
    assert len(by_sample) > 40 and len(by_seed) > 40


def test_permutation_puts_the_gold_answer_everywhere_equally_often():
    positions = Counter(remap_gold(0, permutation(0, 0, f"q{i}", 4)) for i in range(4000))
    assert all(900 < positions[p] < 1100 for p in range(4)), positions


def test_permutation_of_one_or_no_option():
    assert permutation(0, 5, "s", 1) == [0]
    assert permutation(0, 0, "s", 0) == []


@pytest.mark.parametrize("repeat, n, message", [(-1, 4, "repeat must be 0 or more"), (0, 27, "0 to 26 options")])
def test_permutation_rejects_bad_arguments(repeat, n, message):
    with pytest.raises(ValueError, match=message):
        permutation(0, repeat, "s", n)


# --------------------------------------------------------------------------- apply / remap


def test_apply_shows_option_perm_j_at_position_j():
    assert apply(["a", "b", "c"], [2, 0, 1]) == ["c", "a", "b"]


def test_the_remapped_gold_points_at_the_gold_text_and_maps_back():
    for r in range(6):
        perm = permutation(9, r, "q", 4)
        for gold in range(4):
            shown = remap_gold(gold, perm)
            assert apply(ANIMALS, perm)[shown] == ANIMALS[gold]
            assert original_index(shown, perm) == gold


@pytest.mark.parametrize("call", [lambda: apply(["a", "b"], [0, 0]), lambda: apply(["a", "b"], [0]), lambda: remap_gold(0, [1, 2])])
def test_a_wrong_permutation_is_an_error(call):
    with pytest.raises(ValueError, match="is not a permutation"):
        call()


def test_remap_gold_rejects_a_gold_out_of_range():
    with pytest.raises(ValueError, match="out of range"):
        remap_gold(3, [0, 1, 2])


# --------------------------------------------------------------------------- format_prompt


def test_the_default_template_lists_labelled_options():
    assert format_prompt("Which animal is heard?", ["cat", "dog"]) == (
        "Which animal is heard?\n\nOptions:\nA. cat\nB. dog\n\nAnswer with the letter of the correct option."
    )


def test_image_placeholders_stay_in_place():
    prompt = format_prompt("<image 1> What building is this?", ["<image 2>", "Museum"])
    assert prompt.startswith("<image 1> What building is this?")
    assert "A. <image 2>\nB. Museum" in prompt


def test_a_template_may_use_labels_and_keep_other_braces():
    template = "{question}\n{options}\nPick one of {labels}; write \\boxed{{}} or \\box{X}."
    assert format_prompt("Q?", ["x", "y", "z"], template) == "Q?\nA. x\nB. y\nC. z\nPick one of A, B, C; write \\boxed{{}} or \\box{X}."


def test_a_question_with_braces_is_not_a_template():
    assert format_prompt("Is {options} literal?", ["a", "b"], "{question} {options}") == "Is {options} literal? A. a\nB. b"


def test_a_template_without_options_is_an_error():
    with pytest.raises(ValueError, match="lacks \\{options\\}"):
        format_prompt("Q?", ["a", "b"], "{question} Answer with a letter.")


def test_a_prompts_file_overrides_the_template(tmp_path):
    user = tmp_path / "prompts.yaml"
    user.write_text("mc_templates:\n  mc_options: \"Q: {question}\\n{options}\\nLetter only.\"\n")
    prompts = load_prompts(user)
    assert format_prompt("Sound?", ["cat", "dog"], prompts["mc_templates"]["mc_options"]) == "Q: Sound?\nA. cat\nB. dog\nLetter only."
    assert "mc_options_zh" in prompts["mc_templates"]


def test_the_shipped_template_is_the_prompts_yaml_entry():
    assert choices.default_template() == load_prompts()["mc_templates"]["mc_options"]


def test_a_template_that_is_not_text_is_rejected(tmp_path):
    user = tmp_path / "prompts.yaml"
    user.write_text("mc_templates:\n  mc_options: [1, 2]\n")
    with pytest.raises(UserError, match="section 'mc_templates' must map names to texts"):
        load_prompts(user)
