"""instruction_following: IFEval's rules, strict and loose, and the shipped VoiceBench ifeval entry end to end."""

import json

import pytest

from lalmeval.catalog.runspecs import BUILTIN_DIR, Catalog
from lalmeval.metrics.ifeval_rules import RULES, count_sentences, follows
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import model
from tests.test_catalog import hub_folder

CASES = [
    ("punctuation:no_comma", {}, "No commas here.", True),
    ("punctuation:no_comma", {}, "Well, no.", False),
    ("keywords:existence", {"keywords": ["river", "Bank"]}, "The bank of the river.", True),
    ("keywords:frequency", {"keyword": "cat", "frequency": 2, "relation": "at least"}, "cat, Cat and dog", True),
    ("keywords:frequency", {"keyword": "cat", "frequency": 2, "relation": "less than"}, "cat, Cat and dog", False),
    ("keywords:forbidden_words", {"forbidden_words": ["bad"]}, "A badge is fine.", True),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2, "let_relation": "at least"}, "Zebra fizz", True),
    ("length_constraints:number_words", {"num_words": 5, "relation": "less than"}, "one two three four", True),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"}, "Dr. Smith came. He sat! Was it 3.5 hours? Yes.", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "First part.\n***\nSecond part.", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "First.\n***\n\n***\nSecond.", False),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "Then"}, "Start.\n\n\"Then, we go.", True),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name], at [address].", True),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Body.\nP.S. see you", True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* one\n- two\nplain", True),
    ("detectable_format:constrained_response", {}, "My answer is maybe.", True),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*one* and **two**", True),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2}, "Section 1\na\nSection 2\nb", True),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', True),
    ("detectable_format:title", {}, "<<My Title>>\ntext", True),
    ("combination:two_responses", {}, "first answer\n******\nsecond answer", True),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}, "say hi. Hi!", True),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, 'Done. Any other questions?"', True),
    ("startend:quotation", {}, '"quoted"', True),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "at least"}, "THIS is VERY loud", True),
    ("change_case:english_capital", {}, "THIS IS ALL CAPITALS IN ENGLISH TEXT.", True),
    ("change_case:english_lowercase", {}, "this is all lowercase english text about the weather.", True),
    ("language:response_language", {"language": "fr"}, "Ceci est une réponse entièrement écrite en français.", True),
]


def test_every_ifeval_instruction_has_a_rule():
    assert len(RULES) == 25 and {c[0] for c in CASES} == set(RULES)


@pytest.mark.parametrize("instruction, args, text, expected", CASES)
def test_each_rule_decides_as_ifeval_publishes_it(instruction, args, text, expected):
    assert follows(text, instruction, args, loose=False) is expected


def test_the_loose_reading_forgives_a_first_line_and_asterisks():
    reply = "Sure, here it is:\n\"quoted answer\""
    assert not follows(reply, "startend:quotation", {}, loose=False)
    assert follows(reply, "startend:quotation", {}, loose=True)
    assert follows("**My answer is yes.**", "detectable_format:constrained_response", {}, loose=True)


def test_sentences_are_counted_across_abbreviations_and_decimals():
    assert count_sentences("Mr. Brown paid $3.50. Then he left!") == 2


def test_the_shipped_voicebench_ifeval_text_entry_scores_the_mean_of_the_four_ifeval_accuracies(ws):
    """AU-Harness's voicebench_ifeval_text as shipped (only its data pointed at two rows in VoiceBench's layout)."""
    rows = [
        {"key": 1, "prompt": "Write without commas.", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"num_words": None}]},
        {"key": 2, "prompt": "Two things: quote it and end with Bye.", "instruction_id_list": ["startend:quotation", "startend:end_checker"],
         "kwargs": [{"end_phrase": None}, {"end_phrase": "Bye."}]},
    ]
    real = Catalog.load([BUILTIN_DIR]).datasets["voicebench_ifeval_text"]
    raw = json.loads(real.source.read_text(encoding="utf-8"))["voicebench_ifeval_text"]
    folder = hub_folder(ws.root / "voicebench", {("ifeval", "test"): rows}, casts={})  # the hub's layout: config ifeval, split test
    ws.runspec("reasoning", "ifeval", {"standin": {**raw, "hf_repo": str(folder)}})
    replies = {"Write without commas.": "Fine no commas at all", "Two things: quote it and end with Bye.": 'Here:\n"Bye."'}

    def reply(seen, n):
        return next(v for k, v in replies.items() if k in seen.text)

    with ScriptedEndpoint(reply) as ep:
        ws.config([model(ep.url)], [["standin", "instruction_following"]])
        result = ws.run()
    score = result.scores[0]
    # strict: prompt 1/2, instructions 2/3 (the second reply's first line breaks the quotation); loose: all followed
    assert score.details["strict_prompt"] == pytest.approx(50.0) and score.details["strict_instruction"] == pytest.approx(200 / 3)
    assert score.details["loose_prompt"] == pytest.approx(100.0) and score.details["loose_instruction"] == pytest.approx(100.0)
    assert score.score == pytest.approx((50.0 + 200 / 3 + 100.0 + 100.0) / 4)
