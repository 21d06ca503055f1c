"""`lalmeval score --predictions FILE`: an outside prediction file (Kimi-Audio-Evalkit's --eval-file) scored with a
dataset's metrics into a run directory, every selected sample ending as one record; no endpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.endpoint import ScriptedEndpoint
from tests.support.trackers import require, tensorboard_run
from tests.support.workspace import Workspace, model
from tests.test_cli import assert_one_line_error


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=cwd, capture_output=True, text=True, timeout=240)


def replies(seen, n) -> str:
    """A model that gets every third question wrong and drops a word now and then."""
    number = int(seen.text.split()[-1])
    return "no idea" if number % 3 == 0 else (f"answer {number}" if number % 2 else "answer")


@pytest.fixture
def lab(ws: Workspace):
    ws.text_questions(12)   # dataset qs: ids q0..q11, 'question i' → 'answer i'
    ws.config([model("http://127.0.0.1:9/v1", "m")], [["qs", "word_error_rate"]], output_dir="runs")
    return ws


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def final(run_dir: Path) -> dict:
    return json.loads((run_dir / "final_scores.json").read_text())


def records(run_dir: Path) -> dict[str, dict]:
    (file,) = (run_dir / "records").glob("*.jsonl")
    return {r["id"]: r for r in map(json.loads, file.read_text().splitlines())}


def test_a_file_of_a_runs_replies_scores_exactly_as_the_run_did(lab):
    """The same replies, scored by `run` from an endpoint and by `score` from a file: the same scores, intervals, statistics."""
    with ScriptedEndpoint(replies) as ep:
        data = yaml.safe_load((lab.root / "config.yaml").read_text())
        data["models"][0]["info"]["url"] = ep.url
        data["dataset_metric"] = [["qs", "word_error_rate"], ["qs", "bleu"], ["qs", "accuracy"]]
        (lab.root / "config.yaml").write_text(yaml.safe_dump(data))
        assert cli("run", "--config", "config.yaml", "--run-id", "asked", cwd=lab.root).returncode == 0
    asked = records(lab.root / "runs" / "asked")
    write_jsonl(lab.root / "m.jsonl", [{"id": i, "prediction": r["reply"]} for i, r in asked.items()])
    out = cli("score", "--predictions", "m.jsonl", "--config", "config.yaml", "--dataset", "qs", "--run-id", "scored", cwd=lab.root)
    assert out.returncode == 0, out.stderr
    assert 0 < final(lab.root / "runs" / "asked")["scores"][0]["score"] < 100
    keep = ("model", "dataset", "metric", "score", "ci95", "stderr", "num_samples", "num_failed")
    assert [{k: s[k] for k in keep} for s in final(lab.root / "runs" / "scored")["scores"]] == \
           [{k: s[k] for k in keep} for s in final(lab.root / "runs" / "asked")["scores"]]
    for metric in ("word_error_rate", "bleu"):
        name = f"qs__{metric}__m.jsonl"
        lines = [sorted((lab.root / "runs" / run / "scores" / name).read_text().splitlines()) for run in ("scored", "asked")]
        assert lines[0] == lines[1]   # the per-sample scores, line for line (written in the order samples finish)
    for name in ("report.html", "results.csv", "results.md", "config.yaml"):
        assert (lab.root / "runs" / "scored" / name).is_file()
    assert "Results:" in out.stdout and out.stdout.rstrip().splitlines()[-1].startswith("Report: ")
    assert any([c.strip() for c in line.split("│")[1:4]] == ["m", "qs", "word_error_rate"] for line in out.stdout.splitlines())


def test_every_selected_sample_ends_as_one_record_and_unknown_ids_are_reported(lab):
    rows = [{"id": f"q{i}", "prediction": f"answer {i}"} for i in range(9)] + [{"id": "q99", "prediction": "x"}, {"id": "Q1", "prediction": "y"}]
    write_jsonl(lab.root / "preds.jsonl", rows)
    out = cli("score", "--predictions", "preds.jsonl", "--config", "config.yaml", "--dataset", "qs", "--model-name", "outside",
              "--run-id", "s", cwd=lab.root)
    assert out.returncode == 3
    run_dir = lab.root / "runs" / "s"
    got = records(run_dir)
    assert sorted(got) == sorted(f"q{i}" for i in range(12))   # q9..q11 have no prediction: failed records, never dropped
    assert {i: got[i]["error"] for i in ("q9", "q10", "q11")} == dict.fromkeys(("q9", "q10", "q11"), "no prediction in preds.jsonl")
    assert got["q3"]["reply"] == "answer 3" and got["q3"]["reference"] == "answer 3" and got["q3"]["extra"] == {"predictions_row": 4}
    (score,) = final(run_dir)["scores"]
    assert (score["model"], score["num_samples"], score["num_failed"], score["score"]) == ("outside", 12, 3, 0.0)
    assert final(run_dir)["predictions"] == {"file": "preds.jsonl", "rows": 11, "matched": 9, "unmatched": 2, "unmatched_ids": ["q99", "Q1"]}
    assert "2 prediction(s) in preds.jsonl name no selected sample of dataset 'qs' and were not scored: 'q99', 'Q1'" in out.stderr
    assert "3 of 12 sample(s) have no score" in out.stderr and "add their predictions to preds.jsonl" in out.stderr
    stored = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert stored["predictions"] == {"file": str(lab.root / "preds.jsonl"), "model": "outside"} and "models" not in stored
    assert stored["dataset_metric"] == [["qs", "word_error_rate"]]


def test_limit_selects_the_samples_and_the_files_other_ids_are_left_out(lab):
    write_jsonl(lab.root / "all.jsonl", [{"id": f"q{i}", "prediction": f"answer {i}"} for i in range(12)])
    out = cli("score", "--predictions", "all.jsonl", "--config", "config.yaml", "--dataset", "qs", "--limit", "4", "--run-id", "s", cwd=lab.root)
    assert out.returncode == 0, out.stderr
    (score,) = final(lab.root / "runs" / "s")["scores"]
    assert (score["num_samples"], score["num_failed"], score["score"]) == (4, 0, 0.0)
    assert "8 prediction(s) in all.jsonl name no selected sample" in out.stderr


def test_references_in_the_file_win_over_the_datasets(lab):
    write_jsonl(lab.root / "p.jsonl", [{"id": f"q{i}", "prediction": "answer 0", "reference": "answer 0"} for i in range(12)])
    out = cli("score", "--predictions", "p.jsonl", "--config", "config.yaml", "--dataset", "qs", "--run-id", "s", cwd=lab.root)
    assert out.returncode == 0, out.stderr
    assert final(lab.root / "runs" / "s")["scores"][0]["score"] == 0.0
    assert {r["reference"] for r in records(lab.root / "runs" / "s").values()} == {"answer 0"}


def test_a_kimi_result_file_is_its_own_dataset_with_index_answer_and_null(tmp_path):
    (tmp_path / "kimi_asr.csv").write_text("index,audio_path,question,answer,subset,prediction\n"
                                           "0,a.wav,,hello world,clean,hello world\n1,b.wav,,good night,clean,good bye\n2,c.wav,,see you,clean,null\n")
    out = cli("score", "--predictions", "kimi_asr.csv", "--metric", "word_error_rate", "--language", "en", "--run-id", "k", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    run_dir = tmp_path / "run_logs" / "k"
    (score,) = final(run_dir)["scores"]
    assert (score["dataset"], score["model"], score["num_samples"], score["num_failed"]) == ("kimi_asr", "kimi_asr", 3, 1)
    assert score["score"] == pytest.approx(100 * 1 / 4)   # 'good bye' for 'good night': 1 error in 4 reference words
    assert records(run_dir)["2"]["error"] == "no prediction in kimi_asr.csv: row 3 holds null"


def test_a_language_code_that_is_no_language_is_refused_before_scoring(tmp_path):
    """`--language cn` used to score Chinese with English word units (WER 100 where `zh` gives 12.5), exit 0."""
    write_jsonl(tmp_path / "zh.jsonl", [{"id": "a", "prediction": "今天天气很好", "reference": "今天天气很好"}])
    out = cli("score", "--predictions", "zh.jsonl", "--metric", "word_error_rate", "--language", "cn", "--run-id", "z", cwd=tmp_path)
    assert_one_line_error(out, "unknown language 'cn' ('cn' is a country code: did you mean 'zh'?)")
    assert not (tmp_path / "run_logs" / "z" / "final_scores.json").exists()


def test_multiple_choice_scores_letters_against_the_datas_gold_option(ws: Workspace):
    rows = [{"id": f"m{i}", "question": f"Pick {i}", "options": ["cat", "dog", "cow"], "answer": "B"} for i in range(3)]
    ws.runspec("mc", "animals", {"pets": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "audio_column": None,
                                          "textual_input_column": "question", "choices_column": "options", "target_column": "answer",
                                          "metrics": ["accuracy"]}})
    ws.config([model("http://127.0.0.1:9/v1")], [["pets", "accuracy"]], output_dir="runs", shuffle_options=True)
    write_jsonl(ws.root / "p.jsonl", [{"id": "m0", "prediction": "B", "reference": "cat"}, {"id": "m1", "prediction": "The answer is (C)."},
                                      {"id": "m2", "prediction": "dog"}])
    out = cli("score", "--predictions", "p.jsonl", "--config", "config.yaml", "--dataset", "pets", "--run-id", "s", cwd=ws.root)
    assert out.returncode == 0, out.stderr
    got = records(ws.root / "runs" / "s")
    assert got["m0"]["extra"]["options"] == ["cat", "dog", "cow"] and got["m0"]["reference"] == "B. dog"   # data order, data gold
    assert final(ws.root / "runs" / "s")["scores"][0]["score"] == pytest.approx(200 / 3)


def test_a_judge_metric_asks_the_configs_judge(ws: Workspace):
    ws.text_questions(3)
    with ScriptedEndpoint(lambda seen, n: "Rating: 0" if "answer 2" in seen.text else "Rating: 1") as judge:
        # A config of what scoring reads: where the runspecs are, and the judge (no models, no dataset_metric).
        (ws.root / "judge.yaml").write_text(yaml.safe_dump({"runspec_dirs": ["runspecs"], "output_dir": "runs", "judge_properties": {
            "judge_model": "j", "judge_api_endpoint": judge.url, "judge_retry_attempts": 0}}))
        write_jsonl(ws.root / "p.jsonl", [{"id": f"q{i}", "prediction": f"my answer {i}"} for i in range(3)])
        out = cli("score", "--predictions", "p.jsonl", "--config", "judge.yaml", "--dataset", "qs", "--metric", "llm_judge_binary",
                  "--run-id", "s", cwd=ws.root)
        shown = sorted(s.text for s in judge.requests)
    assert out.returncode == 0, out.stderr
    # The judge is shown the question the dataset asks, its reference and the file's prediction.
    assert len(shown) == 3 and all(f"question {i}" in t and f"my answer {i}" in t for i, t in enumerate(shown))
    (score,) = final(ws.root / "runs" / "s")["scores"]
    assert (score["num_samples"], score["num_failed"], score["score"]) == (3, 0, pytest.approx(200 / 3))


@pytest.mark.parametrize("content, fragment", [
    ('{"id": "q1", "prediction": "a"}\n{"id": "q1", "prediction": "b"}\n', "id 'q1' appears twice (rows 1 and 2)"),
    ('{"id": "q1", "answer": "a"}\n', "a prediction file needs a 'prediction' column (columns: id, answer)"),
    ('{"key": "q1", "prediction": "a"}\n', "a prediction file needs an id column ('id' or 'index')"),
    ('{"id": "", "prediction": "a"}\n', "row 1 has no id (column 'id' is empty)"),
    ('{"id": "x1", "prediction": "a"}\n{"id": "x2", "prediction": "b"}\n', "none of its 2 id(s) is a selected sample of dataset 'qs'"),
    ('{"id": "q1", "prediction": "a"\n', "p.jsonl: line 1"),
], ids=["duplicate", "no prediction column", "no id column", "empty id", "no id matches", "broken json"])
def test_a_bad_prediction_file_is_one_line_and_exit_2_with_no_run_directory(lab, content, fragment):
    (lab.root / "p.jsonl").write_text(content)
    out = cli("score", "--predictions", "p.jsonl", "--config", "config.yaml", "--dataset", "qs", "--run-id", "s", cwd=lab.root)
    assert_one_line_error(out, fragment)
    assert not (lab.root / "runs" / "s").exists()


@pytest.mark.slow
def test_flags_that_cannot_go_together_or_a_reused_run_id_are_refused(lab):
    write_jsonl(lab.root / "p.jsonl", [{"id": "q1", "prediction": "answer 1"}])
    assert_one_line_error(cli("score", "--predictions", "p.jsonl", "--dataset", "qs", "--hf-dataset", "x.jsonl", cwd=lab.root),
                          "give --dataset (a dataset lalmeval knows) or --hf-dataset (one declared here), not both")
    assert_one_line_error(cli("score", "--predictions", "p.jsonl", cwd=lab.root), "without --dataset the prediction file is its own dataset: give --metric")
    assert_one_line_error(cli("score", "--predictions", "p.jsonl", "--metric", "bleu", cwd=lab.root), "p.jsonl: no reference column")
    assert_one_line_error(cli("score", "--predictions", "p.jsonl", "--config", "config.yaml", "--dataset", "questions@x", cwd=lab.root),
                          "--dataset: unknown dataset, task type or category 'questions@x'")
    assert cli("score", "--predictions", "p.jsonl", "--config", "config.yaml", "--dataset", "qs", "--run-id", "s", cwd=lab.root).returncode == 3
    assert_one_line_error(cli("score", "--predictions", "p.jsonl", "--config", "config.yaml", "--dataset", "qs", "--run-id", "s", cwd=lab.root),
                          "runs/s already exists: lalmeval score writes a new run directory")


def test_a_scored_file_is_a_run_directory_for_reports_and_trackers(lab):
    require("tensorboardX")
    write_jsonl(lab.root / "p.jsonl", [{"id": f"q{i}", "prediction": f"answer {i}"} for i in range(12)])
    out = cli("score", "--predictions", "p.jsonl", "--config", "config.yaml", "--dataset", "qs", "--run-id", "s", "--log", "tensorboard",
              cwd=lab.root)
    assert out.returncode == 0, out.stderr
    assert tensorboard_run(lab.root / "runs" / "s" / "tensorboard" / "p")["scalars"]["qs/word_error_rate/score"] == [(0, 0.0)]
    board = cli("report", "runs/s", "--out", "board.html", cwd=lab.root)
    assert board.returncode == 0 and "p" in board.stdout and (lab.root / "board.html").is_file()
