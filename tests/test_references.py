"""References and options are text: one documented rule for every value a cell may hold (lalmeval/data/cells.py)."""

from __future__ import annotations

import decimal
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lalmeval.data.cells import cell_text, reference_text
from lalmeval.data.choices import parse_options
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import model


@pytest.mark.parametrize("value,text", [
    (3, "3"), (3.0, "3"), (decimal.Decimal("3.00"), "3"), (np.int64(3), "3"), (np.float64(3.0), "3"),
    (2.5, "2.5"), (-2.50, "-2.5"), (0.1, "0.1"), (np.float32(0.1), "0.1"), (1e-7, "0.0000001"), (1e20, "100000000000000000000"),
    ("3.0", "3.0"), ("", ""), (None, None), (math.nan, None), (np.float64("nan"), None), (decimal.Decimal("NaN"), None),
])
def test_a_cell_has_one_text_whatever_its_type(value, text):
    assert cell_text(value, "answer") == text


@pytest.mark.parametrize("value,message", [
    (True, "answer: a boolean (true) is not a text"), ({"text": "hi", "lang": "en"}, "answer: an object (keys: text, lang) is not a text"),
    (math.inf, "answer: inf is not a finite number"), (["a", "b"], "answer: a list of 2 references; a sample is scored against one"),
])
def test_values_that_are_not_texts_are_refused_naming_the_column(value, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        reference_text(value, "answer")


def test_a_list_of_references_is_a_text_per_turn_only_where_turns_read_them():
    assert reference_text(["one"], "answer") == "one" and reference_text([], "answer") is None
    assert json.loads(reference_text(["a", 2.0, None], "answer", per_turn=True)) == ["a", "2", None]


def test_options_follow_the_same_rule():
    assert parse_options([3.0, 2.5, "x"]) == ["3", "2.5", "x"]
    with pytest.raises(ValueError, match=r"option B is empty"):
        parse_options(["cat", math.nan, "dog"])


def _numbers_set(ws, rows, **spec):
    path = ws.root / "data" / "numbers.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    ws.runspec("qa", "numbers", {"nums": {"hf_repo": "data/numbers.parquet", "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None, **spec}})


def test_a_float_reference_matches_the_reply_in_digits_and_nan_is_no_reference(ws):
    """A parquet float column (how pandas writes integers next to a missing value): 3.0 is the
    reference "3" that the reply "3" matches; NaN is no reference — that sample fails with
    `empty reference`, never scored against the word "nan"."""
    rows = [{"id": "a", "question": "1 + 2?", "answer": 3.0}, {"id": "b", "question": "half of 5?", "answer": 2.5},
            {"id": "c", "question": "unknown", "answer": math.nan}]
    _numbers_set(ws, rows, target_column="answer")
    replies = {"1 + 2?": "3", "half of 5?": "2.5", "unknown": "nan"}
    with ScriptedEndpoint(lambda seen, n: replies[seen.text]) as ep:
        ws.config([model(ep.url)], [["nums", "accuracy"]])
        score = ws.run().scores[0]
    records = {r["id"]: r for r in ws.records("nums", "m")}
    assert [records[i]["reference"] for i in "abc"] == ["3", "2.5", None]
    assert score.score == 100.0 and score.num_failed == 1 and score.details["failures"] == {"empty reference": 1}


@pytest.mark.parametrize("value,reason", [
    ({"text": "hello", "lang": "en"}, "data: json: an object (keys: text, lang) is not a text"),
    (True, "data: json: a boolean (true) is not a text"),
    (["hello", "hi"], "data: json: a list of 2 references"),
])
def test_a_reference_that_is_not_text_fails_its_sample_naming_the_column(ws, value, reason):
    """A webdataset `json` cell or a nested struct mapped as the target is never scored as its JSON
    text: the sample fails before any request, naming the column; the others are scored."""
    rows = [{"id": "a", "question": "say hello", "json": value}, {"id": "b", "question": "say bye", "json": "bye"}]
    ws.runspec("qa", "struct", {"wds": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "textual_input_column": "question",
                                        "audio_column": None, "target_column": "json"}})
    with ScriptedEndpoint(lambda seen, n: "hello" if "hello" in seen.text else "bye") as ep:
        ws.config([model(ep.url)], [["wds", "accuracy"]])
        result = ws.run()
        sent = [r.text for r in ep.requests]
    records = {r["id"]: r for r in ws.records("wds", "m")}
    assert sent == ["say bye"] and records["a"]["error"].startswith(reason)
    score = result.scores[0]
    assert score.score == 100.0 and score.num_failed == 1 and not result.complete
