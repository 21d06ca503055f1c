"""`lalmeval run --limit / --models / --datasets (--tasks) / --metrics`: each narrows or replaces what the config
says, the run's config.yaml records what was run, and a printed resume command keeps the flags."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lalmeval.cli.overrides import Overrides, apply
from lalmeval.config.schema import parse_config
from lalmeval.errors import UserError
from tests.support.endpoint import Reply, ScriptedEndpoint, answer_by_number
from tests.support.workspace import Workspace, model
from tests.test_cli import assert_one_line_error


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=cwd, capture_output=True, text=True, timeout=240)


def questions(ws: Workspace, name: str, task: str, count: int, metrics: list[str]) -> None:
    """A text dataset whose row i asks 'question i' and expects 'answer i', in runspec qa/<task>."""
    rows = [{"id": f"{name}{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(count)]
    path = ws.root / "runspecs" / "qa" / f"{task}.json"
    specs = json.loads(path.read_text()) if path.is_file() else {}
    specs[name] = {"hf_repo": f"../../data/{name}.jsonl", "id_column": "id", "modality": "text", "textual_input_column": "question",
                   "audio_column": None, "language": "english", "metrics": metrics}
    ws.jsonl(rows, f"data/{name}.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(specs))


@pytest.fixture
def lab(ws: Workspace):
    """Datasets qs (6 rows) and more (4 rows) in task type 'questions', solo (3 rows) in 'other'; two models on one endpoint."""
    questions(ws, "qs", "questions", 6, ["accuracy"])
    questions(ws, "more", "questions", 4, ["accuracy"])
    questions(ws, "solo", "other", 3, ["accuracy", "bleu"])
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url, "m1"), model(ep.url, "m2")], [["questions", "accuracy"], ["questions", "word_error_rate"]],
                  output_dir=str(ws.root / "runs"), aggregate=[["accuracy", ["questions"]], ["chrf", ["solo"]]],
                  prompt_rules=[{"model": "m2", "instruction": "Answer briefly."}, {"task": "qs", "user_prompt_add_ons": []}])
        yield ws, ep


def scores(ws: Workspace, run_id: str) -> set[tuple[str, str, str, int]]:
    final = json.loads((ws.root / "runs" / run_id / "final_scores.json").read_text())
    return {(s["model"], s["dataset"], s["metric"], s["num_samples"]) for s in final["scores"]}


def stored(ws: Workspace, run_id: str) -> dict:
    return yaml.safe_load((ws.root / "runs" / run_id / "config.yaml").read_text())


def test_the_four_overrides_narrow_the_run_and_config_yaml_records_what_was_run(lab):
    ws, ep = lab
    out = cli("run", "--config", "config.yaml", "--run-id", "r", "--limit", "2", "--models", "m1", "--datasets", "more",
              "--metrics", "accuracy,word_error_rate", cwd=ws.root)
    assert out.returncode == 0, out.stderr
    assert scores(ws, "r") == {("m1", "more", "accuracy", 2), ("m1", "more", "word_error_rate", 2)}
    assert sorted(s.text for s in ep.requests) == ["question 0", "question 1"]   # m1 only, the first 2 rows of one dataset
    config = stored(ws, "r")
    assert config["filters"]["num_samples"] == 2 and [m["name"] for m in config["models"]] == ["m1"]
    assert config["dataset_metric"] == [["more", "accuracy"], ["more", "word_error_rate"]]
    # A rule naming the model left out applies to nothing and goes with it; the task rule stays. The aggregate over
    # 'questions' still covers a pair of the run, the one over solo (not run) is dropped.
    assert config["prompt_rules"] == [{**config["prompt_rules"][0], "task": "qs", "model": None}]
    assert config["aggregate"] == [["accuracy", ["questions"]]]


def test_tasks_is_datasets_and_without_a_pairing_a_name_runs_its_runspec_metrics(lab):
    ws, _ = lab
    out = cli("run", "--config", "config.yaml", "--run-id", "r", "--tasks", "qs,solo", "--models", "m2", cwd=ws.root)
    assert out.returncode == 0, out.stderr
    # qs sits in the task type the config pairs with two metrics; solo is not in the config: its runspec lists accuracy and bleu.
    assert scores(ws, "r") == {("m2", "qs", "accuracy", 6), ("m2", "qs", "word_error_rate", 6), ("m2", "solo", "accuracy", 3),
                               ("m2", "solo", "bleu", 3)}


def config_of(ws: Workspace):
    return parse_config(yaml.safe_load((ws.root / "config.yaml").read_text()), "config.yaml")


def test_datasets_selects_among_the_configs_pairs_keeping_their_metrics(lab):
    ws, _ = lab
    path = ws.root / "config.yaml"
    config = apply(config_of(ws), Overrides(datasets=("more", "questions")), path)
    assert [list(p) for p in config.dataset_metric] == [["more", "accuracy"], ["more", "word_error_rate"],
                                                        ["questions", "accuracy"], ["questions", "word_error_rate"]]
    assert [list(p) for p in apply(config_of(ws), Overrides(metrics=("bleu",)), path).dataset_metric] == [["questions", "bleu"]]
    narrowed = apply(config_of(ws), Overrides(limit=5, models=("m2",)), path)
    assert narrowed.filters.num_samples == 5 and [m.name for m in narrowed.models] == ["m2"]
    assert narrowed.dataset_metric == config_of(ws).dataset_metric   # untouched without --datasets / --metrics


@pytest.mark.parametrize("flags, fragment", [
    (["--models", "m11"], "--models: unknown model 'm11' (did you mean 'm1'?); config.yaml has: m1, m2"),
    (["--datasets", "qz"], "--datasets: unknown dataset, task type or category 'qz' (did you mean 'qs'?)"),
    (["--tasks", "questons"], "--datasets: unknown dataset, task type or category 'questons' (did you mean 'questions'?)"),
    (["--metrics", "acuracy"], "--metrics: unknown metric 'acuracy' (did you mean 'accuracy'?); valid metrics: "),
    (["--model-url", "http://127.0.0.1:9/v1", "--models", "m1"], "--model-url gives the one model to evaluate"),
    (["--model", "x"], "--model goes with --model-url"),
], ids=["model", "dataset", "task", "metric", "url and models", "model without url"])
def test_an_unknown_name_or_a_flag_out_of_place_is_one_line_and_exit_2_before_any_request(lab, flags, fragment):
    ws, ep = lab
    assert_one_line_error(cli("run", "--config", "config.yaml", *flags, cwd=ws.root), fragment)
    assert ep.requests == []


def test_limit_must_be_a_positive_number(lab):
    ws, _ = lab
    out = cli("run", "--config", "config.yaml", "--limit", "0", cwd=ws.root)
    assert out.returncode == 2 and "argument --limit: expected 1 to 1000000000 samples, got 0" in out.stderr


@pytest.mark.slow
def test_a_printed_retry_command_keeps_the_overrides_and_continues_the_same_evaluation(lab):
    ws, ep = lab
    ep.handler = lambda seen, n: Reply(status=500, payload={"error": "down"}) if seen.text == "question 1" else answer_by_number(seen, n)
    out = cli("run", "--config", "config.yaml", "--run-id", "r", "--limit", "3", "--models", "m1", "--tasks", "qs", "--metrics", "accuracy",
              "--no-cache", cwd=ws.root)
    assert out.returncode == 3, out.stderr
    retry = out.stderr.strip().splitlines()[-1].split("Retry them with: ")[1]
    for flag in ("--limit 3", "--models m1", "--datasets qs", "--metrics accuracy", "--resume r", "--no-cache"):
        assert flag in retry
    ep.handler, sent = answer_by_number, len(ep.requests)
    # Without all the flags it would be another evaluation: refused, naming the difference. (The config alone is
    # not runnable: its aggregate over solo needs a pair the printed --metrics leaves out.)
    bare = cli("run", "--config", "config.yaml", "--resume", "r", "--metrics", "accuracy", cwd=ws.root)
    assert bare.returncode == 2 and "holds a run of a different config" in bare.stderr
    again = subprocess.run(retry, shell=True, cwd=ws.root, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stderr
    assert [s.text for s in ep.requests[sent:]] == ["question 1"]   # only the failed sample is asked again
    assert scores(ws, "r") == {("m1", "qs", "accuracy", 3)}
    final = json.loads((ws.root / "runs" / "r" / "final_scores.json").read_text())
    assert final["scores"][0]["score"] == 100.0 and final["scores"][0]["num_failed"] == 0


@pytest.mark.slow
def test_model_url_needs_no_config_file_and_resumes_from_its_printed_command(tmp_path):
    ws = Workspace(tmp_path)
    questions(ws, "qs", "questions", 3, ["accuracy"])
    (tmp_path / "extra.yaml").write_text(yaml.safe_dump({"runspec_dirs": ["runspecs"]}))  # not read: no --config
    with ScriptedEndpoint(lambda seen, n: Reply(status=500) if seen.text == "question 2" else answer_by_number(seen, n)) as ep:
        # The built-in runspecs are there without a config; the workspace's are reached through a dataset declared by path.
        out = cli("run", "--model-url", ep.url, "--model", "scripted", "--model-name", "mine", "--hf-dataset", "data/qs.jsonl",
                  "--modality", "text", "--text-column", "question", "--id-column", "id", "--metric", "accuracy", "--run-id", "r",
                  "--output-dir", "runs", cwd=tmp_path)
        assert out.returncode == 3, out.stderr
        retry = out.stderr.strip().splitlines()[-1].split("Retry them with: ")[1]
        assert "--config" not in retry and f"--model-url {ep.url}" in retry and "--model-name mine" in retry
        ep.handler = answer_by_number
        again = subprocess.run(retry, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stderr
    config = yaml.safe_load((tmp_path / "runs" / "r" / "config.yaml").read_text())
    assert [(m["name"], m["url"], m["model"]) for m in config["models"]] == [("mine", ep.url, "scripted")]
    assert ep.requests[0].body["model"] == "scripted"


def test_without_a_model_there_is_nothing_to_run(tmp_path):
    (tmp_path / "c.yaml").write_text("dataset_metric: [[demo_commands, word_error_rate]]\nmodels: [{name: m, url: 'http://127.0.0.1:9/v1', model: m}]\n")
    with pytest.raises(UserError, match="no model to evaluate"):
        apply(None, Overrides(datasets=("demo_commands",)), Path("command line"))
    assert_one_line_error(cli("run", "--model-url", "http://127.0.0.1:9/v1", "--model", "m", cwd=tmp_path),
                          "command line: nothing to evaluate: give --config with dataset_metric, --datasets, or --hf-dataset with --metric")


def test_help_lists_the_new_flags():
    out = cli("run", "--help", cwd=Path.cwd()).stdout
    for flag in ("--limit", "--models", "--datasets", "--tasks", "--metrics", "--metric", "--log", "--hf-dataset", "--subset", "--split",
                 "--audio-column", "--target-column", "--instruction", "--language", "--model-url", "--model"):
        assert flag in out, flag
    assert shlex.split("x")  # shlex quoting of printed commands is exercised by the retry tests above


def test_the_python_api_takes_the_same_overrides(lab, monkeypatch):
    import lalmeval
    from tests.support.trackers import require

    require("tensorboardX")
    ws, ep = lab
    monkeypatch.chdir(ws.root)
    result = lalmeval.evaluate("config.yaml", run_id="api", limit=2, models="m1", datasets=["more"], metrics="accuracy", log="tensorboard",
                               quiet=True)
    assert [(s["model"], s["dataset"], s["metric"], s["num_samples"]) for s in result.scores] == [("m1", "more", "accuracy", 2)]
    assert result.complete and list((result.run_dir / "tensorboard" / "m1").glob("events.out.tfevents.*"))
    with pytest.raises(UserError, match="--models: unknown model 'm9'"):
        lalmeval.evaluate("config.yaml", models=["m9"], quiet=True)
