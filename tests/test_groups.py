"""Runspec groups: members resolve, nested groups flatten, and a run reports the group score."""

import json

import pytest

from lalmeval.catalog.runspecs import Catalog
from lalmeval.errors import UserError
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model


def write_groups(ws, groups):
    path = ws.root / "runspecs" / "groups" / "mine.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(groups))
    return path


@pytest.fixture
def labelled(ws):
    """Two datasets the scripted endpoint answers right on 'small' only (1 sample) and wrong on 'large' (3)."""
    rows = ws.copy_demo_audio(demo_rows(4))
    ws.runspec("qa", "labels", {
        "small": {"hf_repo": ws.jsonl(rows[:1], "data/small.jsonl"), "id_column": "id", "metrics": ["accuracy"]},
        "large": {"hf_repo": ws.jsonl(rows[1:], "data/large.jsonl"), "id_column": "id", "metrics": ["accuracy"]},
    })
    return rows


def test_a_group_resolves_to_its_members_with_nested_groups_flattened_once(ws, labelled):
    write_groups(ws, {"inner": {"members": ["large"]}, "outer": {"members": ["small", "inner", "large"]}})
    catalog = Catalog.load([ws.root / "runspecs"])
    assert [d.name for d in catalog.resolve("outer")] == ["small", "large"]
    assert [d.name for d in catalog.resolve("inner")] == ["large"]


@pytest.mark.parametrize("groups, message", [
    ({"g": {"members": ["smal"]}}, r"mine.json: group 'g': member 'smal' is no dataset or group \(did you mean 'small'\?\)"),
    ({"a": {"members": ["b"]}, "b": {"members": ["a"]}}, r"group 'a' contains itself \(via a → b → a\)"),
    ({"small": {"members": ["large"]}}, r"dataset 'small' is defined twice"),
    ({"g": {"members": []}}, r"mine.json: dataset 'g': members: List should have at least 1 item"),
    ({"g": {"members": ["small"], "aggregation": "median"}}, r"mine.json: dataset 'g': aggregation: .*\(got 'median'\)"),
])
def test_a_broken_group_is_refused_naming_its_file(ws, labelled, groups, message):
    write_groups(ws, groups)
    with pytest.raises(UserError, match=message):
        Catalog.load([ws.root / "runspecs"])


@pytest.mark.parametrize("aggregation, expected", [("mean", 50.0), ("weighted_mean", 25.0)])
def test_a_run_naming_a_group_reports_its_group_score_as_the_group_aggregates(ws, labelled, aggregation, expected):
    write_groups(ws, {"both": {"members": ["small", "large"], "aggregation": aggregation}})
    first = labelled[0]["reference"]
    with ScriptedEndpoint(lambda s, n: first) as ep:  # right on 'small' only
        ws.config([model(ep.url)], [["both", "accuracy"]])
        result = ws.run()
    row = next(a for a in result.aggregates if a.get("group") == "both")
    assert row["score"] == pytest.approx(expected)  # mean: (100 + 0) / 2; weighted: 1 correct of 4 samples
    assert (row["aggregation"], row["members"], row["missing"], row["datasets"]) == (aggregation, 2, [], ["large", "small"])
    run_dir = ws.root / "runs" / "t"
    final = json.loads((run_dir / "final_scores.json").read_text())
    assert final["aggregates"] == result.aggregates
    assert f"| {expected:.2f} {aggregation} |" in (run_dir / "results.md").read_text()
    assert f"{expected:.2f} {aggregation}" in (run_dir / "report.html").read_text()


def test_a_group_score_says_which_members_have_no_score(ws, labelled):
    write_groups(ws, {"both": {"members": ["small", "large"]}})
    first = labelled[0]["reference"]
    with ScriptedEndpoint(lambda s, n: first) as ep:
        ws.config([model(ep.url)], [["both", "accuracy"]])
        plan = ws.plan()
    assert plan.aggregates == [("accuracy", ["both"])]
    from lalmeval.reports.scores import aggregates
    from lalmeval.results.records import Score

    only_small = [Score("m", "small", "accuracy", 100.0, 1, 0, {})]
    row = aggregates(plan.aggregates, only_small, plan.catalog)[0]
    assert (row["score"], row["missing"]) == (100.0, ["large"])
