"""What a newcomer meets first, held to what the docs promise: refusals of meaningless input, local data
kept out of git, tables that fit a terminal, numbers printed alike everywhere, spreadsheet-safe CSV."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lalmeval.config.schema import load_config
from lalmeval.errors import UserError
from lalmeval.reports.console import text_table
from lalmeval.reports.scores import comparison_table
from lalmeval.reports.tables import fmt_p
from tests.support.workspace import REPO


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=cwd, capture_output=True, text=True, timeout=240)


def config_file(tmp_path: Path, **model: object) -> Path:
    path = tmp_path / "c.yaml"
    info = {"name": "m", "url": "http://127.0.0.1:9/v1", "model": "m", **model}
    path.write_text(yaml.safe_dump({"dataset_metric": [["demo_commands", "word_error_rate"]], "models": [{"info": info}]}))
    return path


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_where_a_number_belongs_is_refused_not_read_as_one(tmp_path, value):
    with pytest.raises(UserError, match=r"models\[0\]\.batch_size: expected a number, not a boolean"):
        load_config(config_file(tmp_path, batch_size=value))
    assert load_config(config_file(tmp_path, batch_size=1)).models[0].batch_size == 1


def test_a_boolean_generation_number_is_refused(tmp_path):
    with pytest.raises(UserError, match=r"max_tokens: expected a number, not a boolean"):
        load_config(config_file(tmp_path, generation_kwargs={"max_tokens": True}))


@pytest.mark.parametrize("flag,value,what", [("--models", "", "model"), ("--models", ",", "model"), ("--metrics", "", "metric"),
                                             ("--datasets", "", "dataset"), ("--metric", " , ", "metric")])
def test_an_empty_selection_is_one_line_exit_2_not_everything(tmp_path, flag, value, what):
    out = cli("run", "--config", str(config_file(tmp_path)), flag, value, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag.rstrip('s')}") and f"names no {what}: give at least one name" in lines[0]
    assert not (tmp_path / "run_logs").exists()


def test_local_data_under_private_datasets_is_git_ignored_but_the_shipped_demo_is_not():
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=REPO).returncode == 0

    assert ignored("private_datasets/callhome/eng/4065.sph") and ignored("private_datasets/aishell2.csv")
    shipped = subprocess.run(["git", "ls-files", "private_datasets"], cwd=REPO, capture_output=True, text=True).stdout.split()
    assert "private_datasets/demo_commands/demo_commands.jsonl" in shipped
    assert not [path for path in shipped if ignored(path)]


def test_results_csv_cells_a_spreadsheet_would_run_are_kept_as_text(tmp_path):
    (tmp_path / "p.jsonl").write_text(json.dumps({"id": "1", "prediction": "a b", "reference": "a b"}) + "\n")
    for name in ("=HYPERLINK(1)", "+1", "-2", "@SUM(A1)"):
        run_id = f"r{abs(hash(name))}"
        out = cli("score", "--predictions", "p.jsonl", "--metric", "word_error_rate", "--model-name", name, "-o", "runs", "--run-id", run_id,
                  cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        row = next(csv.DictReader((tmp_path / "runs" / run_id / "results.csv").open()))
        assert row["model"] == "'" + name and float(row["score"]) == 0.0   # numbers stay numbers


def test_tables_fit_80_columns_without_splitting_a_word():
    header = ["Model", "Dataset", "Metric", "Num", "Failed", "Score", "95% CI"]
    rows = [["whisper-tiny.en", "demo_commands", "word_error_rate", "40", "0", "30.89", "[22.77, 44.56]"],
            ["pocketsphinx-demo", "demo_commands", "word_error_rate", "40", "0", "15.18", "[5.56, 26.44]"]]
    words = {word for row in [header, *rows] for cell in row for word in cell.split()}
    for width in (80, 60):
        text = text_table(header, rows, range(3, 7), width=width)
        assert max(len(line) for line in text.splitlines()) <= width, text
        assert all(any(w in line for line in text.splitlines()) for w in words), text
    wide = text_table(header, rows, range(3, 7), width=200)
    assert "│ whisper-tiny.en   │ demo_commands │ word_error_rate │  40 │      0 │ 30.89 │ [22.77, 44.56] │" in wide


def test_the_paired_comparison_fits_80_columns_and_prints_its_p_value_as_the_report_does():
    row = {"dataset": "demo_commands", "metric": "word_error_rate", "model_a": "whisper-tiny.en", "model_b": "pocketsphinx-demo",
           "num_samples": 40, "difference": 18.3, "ci95": [3.1, 32.8], "p_value": 1 / 1001}
    for width in (80, 200):
        text = comparison_table([row], stream=None) if width == 200 else _narrow(comparison_table, [row])
        assert "< 0.001" in text and "0.001 " not in text.replace("< 0.001", ""), text
        assert all(len(line) <= width for line in text.splitlines()), text
        assert all(w in text for w in ("demo_commands", "word_error_rate", "whisper-tiny.en", "pocketsphinx-demo")), text
    assert (fmt_p(1 / 1001), fmt_p(0.0181), fmt_p(None)) == ("< 0.001", "0.018", "n/a")


class _Terminal80:
    """A terminal 80 columns wide (rich asks the stream whether it is one)."""

    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def _narrow(draw, rows):
    import os

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"
    try:
        return re.sub(r"\x1b\[[0-9;]*m", "", draw(rows, stream=_Terminal80()))
    finally:
        if previous is None:
            os.environ.pop("COLUMNS")
        else:
            os.environ["COLUMNS"] = previous


def test_reeval_adds_a_metric_without_allow_config_change_and_sends_nothing(tmp_path):
    from tests.support.endpoint import ScriptedEndpoint, answer_by_number
    from tests.support.workspace import Workspace, model

    ws = Workspace(tmp_path)
    ws.text_questions(3)
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url)], [["qs", "word_error_rate"]])
        first = cli("run", "--config", "config.yaml", "--run-id", "r", cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        again = cli("run", "--config", "config.yaml", "--run-id", "r", "--reeval", "--metrics", "word_error_rate,bleu", cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert len(ep.requests) == 3
    final = json.loads((tmp_path / "runs" / "r" / "final_scores.json").read_text())
    assert sorted(s["metric"] for s in final["scores"]) == ["bleu", "word_error_rate"]
    assert all(s["num_samples"] == 3 and s["num_failed"] == 0 for s in final["scores"])
    # Another dataset is another evaluation, --reeval or not: its answers were never asked for.
    other = cli("run", "--config", "config.yaml", "--run-id", "r", "--reeval", "--datasets", "demo_commands", cwd=tmp_path)
    assert other.returncode == 2 and "holds a run of a different config" in other.stderr


def test_when_no_dataset_can_run_every_one_is_named_with_its_reason(tmp_path):
    from tests.support.workspace import Workspace, model

    ws = Workspace(tmp_path)
    ws.runspec("qa", "questions", {name: {"hf_repo": f"data/{name}.jsonl", "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None} for name in ("first", "second", "third")})
    ws.config([model("http://127.0.0.1:9/v1")], [["first", "word_error_rate"], ["second", "word_error_rate"], ["third", "word_error_rate"]])
    out = cli("run", "--config", "config.yaml", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert line.startswith("error: none of the 3 datasets can be evaluated: ")
    assert all(f"[{name}]" in line and f"{name}.jsonl" in line for name in ("first", "second", "third")), line


def test_list_marks_local_data_present_or_missing(tmp_path):
    from tests.support.workspace import Workspace, model

    ws = Workspace(tmp_path)
    ws.text_questions(2, name="here")
    spec = json.loads((tmp_path / "runspecs" / "qa" / "questions.json").read_text())
    spec["gone"] = {**spec["here"], "hf_repo": "../../data/gone.jsonl"}
    (tmp_path / "runspecs" / "qa" / "questions.json").write_text(json.dumps(spec))
    ws.config([model("http://127.0.0.1:9/v1")], [["here", "word_error_rate"]])
    out = cli("list", "questions", "--config", "config.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines()[1:]}
    assert "; local data: present]" in lines["here"]
    assert f"; local data: missing ({(tmp_path / 'data' / 'gone.jsonl').resolve()})]" in lines["gone"]
    demo = cli("list", "demo_commands", cwd=tmp_path)
    assert "local data: present" in demo.stdout
    families = cli("list", "--config", "config.yaml", cwd=tmp_path).stdout
    assert next(line for line in families.splitlines() if line.startswith("  questions (2)")).endswith(" · local data: 1 of 2 present")


def _protocol_config(tmp_path: Path, metric: str, protocol: str) -> None:
    from tests.support.workspace import Workspace, model

    ws = Workspace(tmp_path)
    ws.text_questions(2)
    spec_path = tmp_path / "runspecs" / "qa" / "questions.json"
    spec = json.loads(spec_path.read_text())
    spec["qs"]["protocol"] = protocol
    spec_path.write_text(json.dumps(spec))
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", metric]])


@pytest.mark.parametrize("metric", ["rouge"])
def test_a_protocol_on_a_metric_it_cannot_change_is_refused_at_start(tmp_path, metric):
    _protocol_config(tmp_path, metric, "kimi")
    out = cli("validate", "--config", "config.yaml", cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert f"dataset 'qs': protocol 'kimi' sets error_unit, normalizer, reading, which {metric} does not read" in line
    assert "word_error_rate" in line and "Traceback" not in out.stderr


@pytest.mark.parametrize("metric", ["accuracy", "bleu"])
def test_a_protocol_is_accepted_on_a_metric_whose_reading_it_sets(tmp_path, metric):
    # A peer protocol reads replies verbatim, as the peer does: that changes what accuracy and BLEU score.
    _protocol_config(tmp_path, metric, "kimi")
    out = cli("validate", "--config", "config.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_protocol_on_a_metric_it_changes_is_accepted(tmp_path):
    _protocol_config(tmp_path, "word_error_rate", "kimi")
    out = cli("validate", "--config", "config.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("value", ["", ",", []])
def test_the_python_api_refuses_an_empty_selection_too(tmp_path, value):
    import lalmeval

    with pytest.raises(UserError, match="models=.* names no model: give at least one name"):
        lalmeval.evaluate(str(config_file(tmp_path)), models=value, quiet=True)
