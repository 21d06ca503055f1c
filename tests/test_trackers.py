"""`--log wandb|mlflow|tensorboard`: a run's scores and per-sample tables logged offline inside its run directory,
read back with each tracker's own reader; a tracker that is not installed stops the run before it starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint, answer_by_number
from tests.support.trackers import require, tensorboard_run, wandb_run
from tests.support.workspace import REPO, Workspace, model
from tests.test_cli import assert_one_line_error

SECRET = "tok-tracker-secret-77"


def cli(*args: str, cwd: Path, code: str = "", home: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI as a user runs it; `code` runs first in the same interpreter (to hide a package); `home` is its HOME."""
    start = f"{code}\nimport sys\nfrom lalmeval.cli.commands import main\nsys.argv[0] = 'lalmeval'\nsys.exit(main(sys.argv[1:]))"
    env = {**os.environ, **({"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "XDG_DATA_HOME": str(home / ".local")} if home else {})}
    return subprocess.run([sys.executable, "-c", start, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture
def lab(ws: Workspace):
    """Two models on a text set of 4 questions: m1 answers all, m2 gets question 3 wrong and fails question 2."""
    ws.text_questions(4)

    def reply(seen, n):
        if seen.body["model"] == "scripted-m2" and seen.text == "question 2":
            return Reply(status=400, payload={"error": {"message": "bad request"}})
        if seen.body["model"] == "scripted-m2" and seen.text == "question 3":
            return "wrong"
        return answer_by_number(seen, n)

    with ScriptedEndpoint(reply) as ep:
        ws.config([model(ep.url, "m1", auth_token=SECRET), model(ep.url, "m2", auth_token=SECRET)], [["qs", "accuracy"], ["qs", "bleu"]],
                  output_dir="runs")
        yield ws, ep


def logged_run(ws: Workspace, trackers: str) -> Path:
    home = ws.root / "home"
    home.mkdir()
    out = cli("run", "--config", "config.yaml", "--run-id", "r", "--log", trackers, cwd=ws.root, home=home)
    assert not any(home.rglob("*")), f"{trackers} wrote outside the run directory: {sorted(home.rglob('*'))[:5]}"
    assert out.returncode == 3, out.stderr   # m2's failed sample
    assert "Traceback" not in out.stderr and "warning" not in out.stderr, out.stderr
    return ws.root / "runs" / "r"


def no_secret_under(folder: Path) -> None:
    for file in folder.rglob("*"):
        if file.is_file():
            assert SECRET.encode() not in file.read_bytes(), file


def test_wandb_writes_one_offline_run_per_model_in_the_run_directory(lab):
    require("wandb")
    ws, _ = lab
    run_dir = logged_run(ws, "wandb")
    runs = {r["name"]: r for r in map(wandb_run, sorted((run_dir / "wandb").glob("offline-run-*")))}
    assert sorted(runs) == ["m1", "m2"]
    m2 = runs["m2"]
    assert m2["history"]["qs/accuracy/score"] == pytest.approx(200 / 3)   # of the 3 it answered, q0 and q1 right, q3 wrong
    assert m2["history"]["qs/accuracy/num_samples"] == 4 and m2["history"]["qs/accuracy/num_failed"] == 1
    assert runs["m1"]["history"]["qs/accuracy/score"] == 100.0 and "qs/bleu/score" in runs["m1"]["history"]
    table = m2["tables"]["samples/qs"]
    assert table["columns"] == ["id", "repeat", "reference", "prediction", "error", "accuracy", "bleu"]
    rows = {row[0]: row for row in table["data"]}
    assert rows["q3"][3:6] == ["wrong", None, 0.0] and rows["q2"][4].startswith("HTTP 400") and rows["q2"][5] is None
    assert m2["config"]["lalmeval_run_id"] == "r" and m2["config"]["dataset_metric"] == [["qs", "accuracy"], ["qs", "bleu"]]
    no_secret_under(run_dir / "wandb")


@pytest.mark.slow
def test_mlflow_writes_a_file_store_in_the_run_directory(lab):
    require("mlflow")
    from mlflow.tracking import MlflowClient

    ws, _ = lab
    run_dir = logged_run(ws, "mlflow")
    import os

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"   # reading it back as `mlflow ui --backend-store-uri` does
    try:
        client = MlflowClient(tracking_uri=(run_dir / "mlruns").as_uri())
        experiment = client.get_experiment_by_name("lalmeval")
        runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
        assert sorted(runs) == ["m1", "m2"]
        m2 = runs["m2"]
        assert m2.data.metrics["qs/accuracy/score"] == pytest.approx(200 / 3) and m2.data.metrics["qs/accuracy/num_failed"] == 1
        assert m2.data.params["lalmeval_run_id"] == "r" and m2.data.tags["lalmeval.model"] == "m2" and m2.info.status == "FINISHED"
        table = json.loads((Path(m2.info.artifact_uri.removeprefix("file://")) / "samples" / "qs.json").read_text())
        assert table["columns"] == ["id", "repeat", "reference", "prediction", "error", "accuracy", "bleu"] and len(table["data"]) == 4
        artifacts = {a.path for a in client.list_artifacts(m2.info.run_id)}
        assert {"final_scores.json", "config.yaml", "report.html", "samples"} <= artifacts
    finally:
        os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)
    no_secret_under(run_dir / "mlruns")


def test_tensorboard_writes_event_files_per_model_and_a_resume_replaces_them(lab):
    require("tensorboardX")
    ws, ep = lab
    run_dir = logged_run(ws, "tensorboard")
    m2 = tensorboard_run(run_dir / "tensorboard" / "m2")
    assert m2["scalars"]["qs/accuracy/score"] == [(0, pytest.approx(200 / 3))] and m2["scalars"]["qs/accuracy/num_samples"] == [(0, 4.0)]
    (samples,) = m2["texts"]["samples/qs"]
    assert "| id | repeat | reference | prediction | error | accuracy | bleu |" in samples and "| q3 | 0 | answer 3 | wrong |  | 0.0 |" in samples
    assert "lalmeval_run_id: r" in m2["texts"]["config"][0]
    # Resumed with --log (as the printed command keeps it): the complete scores replace the partial ones.
    ep.handler = answer_by_number
    out = cli("run", "--config", "config.yaml", "--run-id", "r", "--log", "tensorboard", cwd=ws.root)
    assert out.returncode == 0, out.stderr
    resumed = tensorboard_run(run_dir / "tensorboard" / "m2")["scalars"]   # q2 answered now; q3's stored wrong answer stays
    assert resumed["qs/accuracy/score"] == [(0, 75.0)] and resumed["qs/accuracy/num_failed"] == [(0, 0.0)]
    no_secret_under(run_dir / "tensorboard")


def test_a_printed_retry_command_keeps_log(lab):
    ws, _ = lab
    require("tensorboardX")
    out = cli("run", "--config", "config.yaml", "--run-id", "r", "--log", "tensorboard", cwd=ws.root)
    assert out.returncode == 3 and "--log tensorboard --resume r" in out.stderr.strip().splitlines()[-1]


def test_a_tracker_that_is_not_installed_stops_the_run_before_any_request(lab):
    ws, ep = lab
    hide = ("import sys\nclass Hide:\n    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'mlflow':\n            raise ModuleNotFoundError(f'No module named {name!r}')\n"
            "sys.meta_path.insert(0, Hide())")
    out = cli("run", "--config", "config.yaml", "--log", "tensorboard,mlflow", cwd=ws.root, code=hide)
    # In a checkout the extra is installed from it (a wheel's install says pip install 'lalmeval[mlflow]': tests/test_wheel.py).
    assert_one_line_error(out, "--log mlflow needs the mlflow package", f"pip install -e '{REPO}[mlflow]'")
    assert ep.requests == [] and not (ws.root / "runs").exists()


@pytest.mark.parametrize("flags, fragment", [
    (["--log", "wandbb"], "--log: unknown tracker 'wandbb' (did you mean 'wandb'?); valid trackers: mlflow, tensorboard, wandb"),
    (["--log", "tensorboard", "--skip-eval"], "--log logs the scores, and --skip-eval computes none"),
], ids=["unknown", "skip-eval"])
def test_a_log_that_cannot_be_done_is_one_line(lab, flags, fragment):
    ws, ep = lab
    assert_one_line_error(cli("run", "--config", "config.yaml", *flags, cwd=ws.root), fragment)
    assert ep.requests == []
