"""lalmeval compare: paired differences between runs, like-for-like refusals, Holm correction and the regression gate."""

import json

import pytest

from lalmeval.cli.commands import main
from lalmeval.reports.compare import Side, compare, holm
from lalmeval.reports.rundir import load_run
from tests.support.endpoint import ScriptedEndpoint
from tests.support.noisy_model import NoisyModel, noisy_datasets
from tests.support.workspace import model

DATASETS = [f"set{i}" for i in range(8)]


def two_runs(ws, samples=60, worse=None, config=None, second_config=None, names=DATASETS):
    """Runs 'base' (seed 1) and 'cand' (seed 2, `worse` injected) of the same model on the same data."""
    references = noisy_datasets(ws, names, samples)
    pairs = [[name, "word_error_rate"] for name in names]
    for run_id, seed, extra in (("base", 1, config), ("cand", 2, second_config if second_config is not None else config)):
        with ScriptedEndpoint(NoisyModel(references, seed, worse if run_id == "cand" else None)) as ep:
            ws.config([model(ep.url)], pairs, **(extra or {}))
            ws.run(run_id)
    return ws.root / "runs" / "base", ws.root / "runs" / "cand"


def test_injected_regression_on_one_of_eight_datasets_is_flagged_alone_and_fails_the_gate(ws, tmp_path, capsys):
    base, cand = two_runs(ws, worse=("set3", 0.2))
    out = tmp_path / "cmp.json"
    code = main(["compare", str(base), str(cand), "--fail-on-regression", "1", "--json", str(out), "--html", str(tmp_path / "c.html")])
    assert code == 1
    data = json.loads(out.read_text())
    rows = data["comparisons"][0]["rows"]
    assert len(rows) == 8
    assert [r["dataset"] for r in rows if r["verdict"] == "worse"] == ["set3"]
    assert data["comparisons"][0]["regressions"] == ["set3 · word_error_rate"]
    assert "REGRESSION: set3 · word_error_rate" in capsys.readouterr().err
    assert "set3" in (tmp_path / "c.html").read_text()


def test_runs_that_differ_by_seed_only_pass_the_gate(ws, tmp_path):
    base, cand = two_runs(ws, names=DATASETS[:3])
    assert main(["compare", str(base), str(cand), "--fail-on-regression", "0", "--html", ""]) == 0


def test_a_regression_smaller_than_the_allowed_points_passes_the_gate(ws, tmp_path):
    base, cand = two_runs(ws, worse=("set0", 0.2), names=DATASETS[:2])
    out = tmp_path / "cmp.json"
    assert main(["compare", str(base), str(cand), "--fail-on-regression", "50", "--json", str(out), "--html", ""]) == 0
    rows = json.loads(out.read_text())["comparisons"][0]["rows"]
    assert [r["verdict"] for r in rows] == ["worse", "no change"]


def test_difference_interval_and_p_are_the_within_run_paired_bootstrap(ws):
    """Two models of one run give a paired comparison in final_scores.json: compare on the same records gives the same numbers."""
    references = noisy_datasets(ws, ["set0"], 40)
    with ScriptedEndpoint(NoisyModel(references, 1)) as a, ScriptedEndpoint(NoisyModel(references, 2, ("set0", 0.1))) as b:
        ws.config([model(a.url, name="a"), model(b.url, name="b")], [["set0", "word_error_rate"]])
        ws.run("both")
    run = load_run(ws.root / "runs" / "both")
    within = run.comparisons[0]
    assert (within["model_a"], within["model_b"]) == ("a", "b")
    across = compare(Side(run, "b"), Side(run, "a"), 1000, 0).rows[0]   # baseline b, candidate a: a − b
    assert across["difference"] == pytest.approx(within["difference"])
    assert across["ci95"] == pytest.approx(within["ci95"])
    assert across["p_value"] == pytest.approx(within["p_value"])


@pytest.mark.parametrize("change, reason", [
    ({"filters": {"system_prompts": ["concise"]}}, "system prompt"),
    ({"temperature_overrides": [{"model": "m", "temperature": 0.7}]}, "generation"),
    ({"filters": {"num_samples": 20}}, "the selected samples differ"),
])
def test_runs_asked_differently_are_refused_before_any_number(ws, tmp_path, capsys, change, reason):
    base, cand = two_runs(ws, names=DATASETS[:1], second_config=change)
    out = tmp_path / "cmp.json"
    assert main(["compare", str(base), str(cand), "--json", str(out), "--html", ""]) == 2
    captured = capsys.readouterr()
    assert reason in captured.err and "--allow-different" in captured.err
    assert "Δ" not in captured.out   # no table of numbers
    assert json.loads(out.read_text())["refused"] is True
    # The printed fix works: compared anyway, the differences are still said.
    assert main(["compare", str(base), str(cand), "--allow-different", "--html", ""]) == 0
    assert reason in capsys.readouterr().err


def test_runs_with_no_dataset_in_common_are_refused_not_passed_by_the_gate(ws, tmp_path, capsys):
    references = noisy_datasets(ws, DATASETS[:2], 20)
    for run_id, name in (("base", "set0"), ("other", "set1"), ("cand", "set0")):
        with ScriptedEndpoint(NoisyModel(references, 1)) as ep:
            ws.config([model(ep.url)], [[name, "word_error_rate"]])
            ws.run(run_id)
    runs = ws.root / "runs"
    out = tmp_path / "cmp.json"
    assert main(["compare", str(runs / "base"), str(runs / "other"), "--fail-on-regression", "1", "--json", str(out), "--html", ""]) == 2
    err = capsys.readouterr().err
    assert "no dataset–metric in common" in err and "nothing was compared" in err
    assert json.loads(out.read_text())["exit_code"] == 2
    # The printed fix works: a candidate run of the baseline's dataset and metric is compared.
    assert main(["compare", str(runs / "base"), str(runs / "cand"), "--fail-on-regression", "1", "--html", ""]) == 0


def test_holm_correction_multiplies_the_smallest_p_by_the_number_of_tests():
    rows = [{"p_value": p} for p in (0.01, 0.04, 0.03, 0.5)]
    holm(rows)
    assert [r["p_holm"] for r in rows] == pytest.approx([0.04, 0.09, 0.09, 0.5])


def test_a_folder_that_is_not_a_run_is_refused_in_one_line(ws, tmp_path, capsys):
    assert main(["compare", str(tmp_path), str(tmp_path / "nothing"), "--html", ""]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "final_scores.json" in err


def test_repeats_of_a_sample_are_paired_and_resampled_together(ws, tmp_path):
    base, cand = two_runs(ws, samples=30, names=DATASETS[:1], config={"repeat_runs": 3})
    out = tmp_path / "cmp.json"
    assert main(["compare", str(base), str(cand), "--json", str(out), "--html", ""]) == 0
    row = json.loads(out.read_text())["comparisons"][0]["rows"][0]
    assert row["num_samples"] == 30   # one bootstrap draw per sample, its three repeats summed
    final = json.loads((base / "final_scores.json").read_text())["scores"][0]
    assert row["baseline"] == pytest.approx(final["score"])


def test_metrics_say_which_direction_is_worse():
    from lalmeval.reports.compare import lower_is_better

    assert lower_is_better("word_error_rate") and lower_is_better("speaker_diarization")
    assert not lower_is_better("accuracy") and not lower_is_better("bleu") and not lower_is_better("llm_judge_binary")


def test_each_further_candidate_is_compared_with_the_baseline_and_models_pair_as_told(ws, tmp_path, capsys):
    references = noisy_datasets(ws, DATASETS[:1], 40)
    for run_id, name, seed in (("base", "old", 1), ("c1", "new", 2), ("c2", "newer", 3)):
        with ScriptedEndpoint(NoisyModel(references, seed)) as ep, ScriptedEndpoint(NoisyModel(references, seed + 10)) as other:
            ws.config([model(ep.url, name=name), model(other.url, name="ref")], [["set0", "word_error_rate"]])
            ws.run(run_id)
    runs = [str(ws.root / "runs" / r) for r in ("base", "c1", "c2")]
    assert main(["compare", *runs, "--html", ""]) == 0   # 'ref' is in every run: it pairs with itself
    assert "c1:ref against base:ref" in capsys.readouterr().out
    out = tmp_path / "cmp.json"
    assert main(["compare", runs[0], runs[1], "--pair", "old=new", "--json", str(out), "--html", ""]) == 0
    (only,) = json.loads(out.read_text())["comparisons"]
    assert (only["baseline"]["model"], only["candidate"]["model"]) == ("old", "new")
    assert main(["compare", runs[0], runs[1], "--pair", "old=nosuch", "--html", ""]) == 2
    assert "give BASELINE_MODEL=CANDIDATE_MODEL" in capsys.readouterr().err


@pytest.mark.slow
def test_runs_differing_only_by_seed_raise_a_false_alarm_in_at_most_5_percent_of_40_pairs(tmp_path):
    from lalmeval.reports.compare import verdict
    from tests.support.workspace import Workspace

    names, alarms = DATASETS[:4], 0
    for repetition in range(40):
        ws = Workspace(tmp_path / f"rep{repetition}")
        references = noisy_datasets(ws, names, 40)
        for run_id, seed in (("base", 2 * repetition), ("cand", 2 * repetition + 1)):
            with ScriptedEndpoint(NoisyModel(references, seed)) as ep:
                ws.config([model(ep.url)], [[n, "word_error_rate"] for n in names])
                ws.run(run_id)
        result = compare(Side(load_run(ws.root / "runs" / "base"), "m"), Side(load_run(ws.root / "runs" / "cand"), "m"), 1000, 0)
        assert not result.differences and len(result.rows) == 4
        alarms += any(verdict(row) != "no change" for row in result.rows)
    assert alarms <= 2, f"{alarms} false alarms in 40 pairs"
