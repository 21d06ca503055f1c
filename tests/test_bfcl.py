"""BFCL function calling: the prompt with the row's functions, and bfcl_match_score as AU-Harness computes it."""

import json
from pathlib import Path

import pytest

from lalmeval.catalog.runspecs import BUILTIN_DIR, Catalog
from lalmeval.metrics.bfcl import calls_in, matches, reference_calls
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import model, runspec_dataset
from tests.test_catalog import hub_folder

TOOLS = [{"name": "math.area", "description": "Area of a shape.",
          "parameters": {"type": "dict", "properties": {"shape": {"type": "string"}, "sides": {"type": "array"}, "unit": {"type": "string"}},
                         "required": ["shape", "sides"]}}]
TRUTH = [{"area": {"shape": ["square"], "sides": [[2, 2]], "unit": ["", "cm"]}}]


def reference(truth=TRUTH, tools=TOOLS):
    return json.dumps({"reference": json.dumps(truth), "tools": json.dumps(tools)})


@pytest.mark.parametrize("reply, expected", [
    ('```json\n[{"math_area": {"shape": "square", "sides": [2, 2]}}]\n```', True),
    ('[{"math.area": {"shape": "Square!", "sides": [2, 2], "unit": "cm"}}]', True),      # dots as underscores; scalars not compared
    ('```json\n[{math_area: {shape: "square", sides: [2, 2]}}]\n```', True),              # bare keys are quoted first
    ('[{"math_area": {"shape": "square", "sides": [3, 2]}}]', False),                    # a list argument must be an allowed value
    ('[{"math_area": {"shape": "square"}}]', False),                                      # a required argument is missing
    ('[{"math_area": {"shape": "square", "sides": [2, 2], "color": "red"}}]', False),    # an argument the reference does not know
    ('[{"math_volume": {"shape": "square", "sides": [2, 2]}}]', False),                  # another function
    ('[]', False),                                                                          # too few calls
    ("I would call the area function.", False),                                            # no calls at all
])
def test_a_reply_matches_when_its_calls_are_the_references(reply, expected):
    truth, required = reference_calls(reference())
    assert matches(calls_in(reply), truth, required) is expected


def test_parallel_calls_match_in_any_order_and_irrelevance_expects_none():
    truth = [{"area": {"shape": ["square"], "sides": [[1, 1]]}}, {"area": {"shape": ["square"], "sides": [[2, 2]]}}]
    calls, required = reference_calls(reference(truth))
    reply = '[{"math_area": {"shape": "square", "sides": [2, 2]}}, {"math_area": {"shape": "square", "sides": [1, 1]}}]'
    assert matches(calls_in(reply), calls, required)
    assert not matches(calls_in('[{"math_area": {"shape": "square", "sides": [2, 2]}}] '), calls, required)
    none, required = reference_calls(reference([]))
    assert matches(calls_in("```json\n []\n```"), none, required)


def test_the_shipped_bfcl_text_entry_sends_the_functions_and_the_question_and_scores_the_calls(ws):
    """AU-Harness's bfcl_text_simple as shipped, pointed at two rows in BFCL_v3_audio's layout."""
    rows = [{"id": "s0", "question": json.dumps([["What is the area of a 2 by 2 square?"]]), "tools": json.dumps(TOOLS), "reference": json.dumps(TRUTH)},
            {"id": "s1", "question": json.dumps([["And of a 3 by 2 one?"]]), "tools": json.dumps(TOOLS),
             "reference": json.dumps([{"area": {"shape": ["square"], "sides": [[3, 2]]}}])}]
    real = Catalog.load([BUILTIN_DIR]).datasets["bfcl_text_simple"]
    raw = json.loads(real.source.read_text(encoding="utf-8"))["bfcl_text_simple"]
    folder = hub_folder(ws.root / "bfcl", {("BFCL_v3_simple", "test"): rows}, casts={})
    ws.runspec("reasoning", "bfcl", {"standin": {**raw, "hf_repo": str(folder), "id_column": "id"}})
    seen = []

    def reply(request, n):
        seen.append(request.text)
        return '```json\n[{"math_area": {"shape": "square", "sides": [2, 2]}}]\n```'  # right for the first row only

    with ScriptedEndpoint(reply) as ep:
        ws.config([model(ep.url)], [["standin", "bfcl_match_score"]])
        result = ws.run()
    assert result.scores[0].score == pytest.approx(50.0)
    prompt = next(t for t in seen if "2 by 2" in t)
    assert "Here is a list of functions in JSON format that you can invoke.\n[\n    {\n        \"name\": \"math_area\"" in prompt
    assert prompt.rstrip().endswith("What is the area of a 2 by 2 square?")


AU_BFCL = json.loads((Path(__file__).parent / "fixtures" / "peer_scores" / "au_bfcl.json").read_text(encoding="utf-8"))


def test_bfcl_match_score_credits_and_prints_what_au_harnesss_own_bfcl_code_does(tmp_path):
    from lalmeval.metrics.bfcl import BfclMatchScore
    from lalmeval.postprocess.general import GeneralPostprocessor
    from lalmeval.results.records import Record

    ds = runspec_dataset(tmp_path, language="en", protocol="au_harness", target_column=["reference", "tools"], metrics=["bfcl_match_score"])
    metric = BfclMatchScore(ds, GeneralPostprocessor())
    items = [metric.score_record(Record(id=str(i), prompt="", system=None, params={}, reference=reference(c["truth"], c["tools"]), prediction=c["reply"]))
             for i, c in enumerate(AU_BFCL["cases"])]
    assert [x["score"] for x in items] == [c["peer"] for c in AU_BFCL["cases"]]
    value, _ = metric.aggregate(items)
    assert round(value, 2) == AU_BFCL["printed"]
