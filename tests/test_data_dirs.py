"""No dead ends around data folders: a file outside the data's folder is refused with the one line that
allows it, every mode (run, run --hf-dataset, validate) takes that line, the printed retry command
succeeds when followed, and `lalmeval score`, which reads no audio, never refuses a sample for one."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from lalmeval.data.confine import folders_to_allow
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import DEMO, demo_rows


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=cwd, capture_output=True, text=True, timeout=240)


def manifest(root: Path, count: int = 4) -> Path:
    """The usual manifest: data/manifest.csv of absolute paths into a corpus elsewhere, its clips in two speaker folders."""
    rows = demo_rows(count)
    (root / "data").mkdir(parents=True, exist_ok=True)
    lines = ["id,audio,reference"]
    for i, row in enumerate(rows):
        clip = root / "corpus" / f"speaker{i % 2}" / Path(row["audio"]).name
        clip.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DEMO / row["audio"], clip)
        lines.append(f"{row['id']},{clip},{row['reference']}")
    path = root / "data" / "manifest.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def printed_command(stderr: str, after: str) -> list[str]:
    """The command a message prints after `after`, as argv (it starts with this interpreter's -m lalmeval)."""
    line = next(line for line in stderr.splitlines() if after in line)
    return shlex.split(line.split(after, 1)[1])


def score_of(root: Path, run_id: str) -> dict:
    return json.loads((root / "runs" / run_id / "final_scores.json").read_text())["scores"][0]


def reply_reference(seen, n):
    return "turn on the lights"


def test_a_manifest_of_absolute_paths_elsewhere_runs_by_following_the_printed_retry_command(tmp_path):
    manifest(tmp_path)
    with ScriptedEndpoint(reply_reference) as ep:
        first = cli("run", "--hf-dataset", "data/manifest.csv", "--id-column", "id", "--metric", "word_error_rate",
                    "--model-url", ep.url, "--model", "m", "-o", "runs", "--run-id", "r", cwd=tmp_path)
        assert first.returncode == 3, first.stderr
        corpus = str((tmp_path / "corpus").resolve())
        # Each sample's reason names the line that allows its own folder ...
        assert f"to read it, allow its folder: --allow-data-dir {corpus}/speaker0 (or allowed_data_dirs: [{corpus}/speaker0] in the config)" in first.stdout
        # ... and the summary the one folder that lets every one in, in the command it prints.
        assert f"allow {corpus} (--allow-data-dir {corpus} or allowed_data_dirs: [{corpus}] in the config)" in first.stderr
        assert "Retry them with" not in first.stderr and len(ep.requests) == 0
        again = printed_command(first.stderr, "retry them with: ")
        assert again[-2:] == ["--allow-data-dir", corpus]
        second = subprocess.run(again, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert second.returncode == 0, second.stderr
    score = score_of(tmp_path, "r")
    assert (score["num_samples"], score["num_failed"]) == (4, 0) and len(ep.requests) == 4
    stored = yaml.safe_load((tmp_path / "runs" / "r" / "config.yaml").read_text())
    assert stored["allowed_data_dirs"] == [corpus]


def test_a_config_run_takes_the_flag_and_a_resume_with_it_is_the_same_evaluation(tmp_path):
    manifest(tmp_path)
    with ScriptedEndpoint(reply_reference) as ep:
        (tmp_path / "my.yaml").write_text(yaml.safe_dump({
            "models": [{"name": "m", "url": ep.url, "model": "m"}], "output_dir": "runs",
            "datasets": {"man": {"hf_repo": "data/manifest.csv", "id_column": "id", "language": "english"}},
            "dataset_metric": [["man", "word_error_rate"]]}))
        first = cli("run", "--config", "my.yaml", "--run-id", "r", cwd=tmp_path)
        assert first.returncode == 3, first.stderr
        again = printed_command(first.stderr, "retry them with: ")
        second = subprocess.run(again, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert second.returncode == 0, second.stderr
    assert (score_of(tmp_path, "r")["num_failed"], len(ep.requests)) == (0, 4)


def test_validate_names_the_config_line_and_takes_the_flag(tmp_path):
    manifest(tmp_path)
    config = {"models": [{"name": "m", "url": "http://127.0.0.1:9/v1", "model": "m"}],
              "datasets": {"man": {"hf_repo": "data/manifest.csv", "id_column": "id", "language": "english"}},
              "dataset_metric": [["man", "word_error_rate"]]}
    (tmp_path / "my.yaml").write_text(yaml.safe_dump(config))
    refused = cli("validate", "--config", "my.yaml", cwd=tmp_path)
    corpus = str((tmp_path / "corpus").resolve())
    assert refused.returncode == 2
    assert f"error: dataset 'man': its rows name files outside its folder: add allowed_data_dirs: [{corpus}] to my.yaml" in refused.stderr
    assert cli("validate", "--config", "my.yaml", "--allow-data-dir", "corpus", cwd=tmp_path).returncode == 0
    (tmp_path / "my.yaml").write_text(yaml.safe_dump({**config, "allowed_data_dirs": [corpus]}))
    assert cli("validate", "--config", "my.yaml", cwd=tmp_path).returncode == 0


def test_allow_data_dir_that_is_no_folder_is_one_line_exit_2(tmp_path):
    manifest(tmp_path)
    out = cli("run", "--hf-dataset", "data/manifest.csv", "--metric", "word_error_rate", "--model-url", "http://127.0.0.1:9/v1",
              "--model", "m", "--allow-data-dir", "no/such/dir", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == "error: --allow-data-dir 'no/such/dir': no such folder"


def test_score_reads_no_audio_so_no_clip_outside_the_data_folder_or_missing_fails_a_sample(tmp_path):
    path = manifest(tmp_path)
    shutil.rmtree(tmp_path / "corpus")   # the clips are gone too: the predictions alone are scored
    rows = [line.split(",") for line in path.read_text().splitlines()[1:]]
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps({"id": r[0], "prediction": r[2]}) + "\n" for r in rows))
    out = cli("score", "--predictions", "preds.jsonl", "--hf-dataset", "data/manifest.csv", "--id-column", "id",
              "--metric", "word_error_rate", "-o", "runs", "--run-id", "s", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    score = score_of(tmp_path, "s")
    assert (score["num_samples"], score["num_failed"], score["score"]) == (4, 0, 0.0)


def test_a_retry_that_would_read_the_same_broken_data_says_to_fix_it_first(tmp_path):
    path = manifest(tmp_path, 2)
    (tmp_path / "data" / "missing.csv").write_text(path.read_text().replace(str(tmp_path / "corpus"), str(tmp_path / "data" / "gone")))
    with ScriptedEndpoint(reply_reference) as ep:
        out = cli("run", "--hf-dataset", "data/missing.csv", "--id-column", "id", "--metric", "word_error_rate",
                  "--model-url", ep.url, "--model", "m", "-o", "runs", "--run-id", "r", cwd=tmp_path)
    assert out.returncode == 3
    assert "As they stand these would fail again: fix what the reasons above name (the data, or max_audio_seconds for a long clip), then retry them with: " in out.stderr


def test_the_folders_to_allow_are_the_files_common_folder_and_never_the_whole_disk():
    assert folders_to_allow(["/srv/corpus/a/1.flac", "/srv/corpus/b/2.flac"]) == ["/srv/corpus"]
    assert folders_to_allow(["/srv/corpus/a/1.flac"]) == ["/srv/corpus/a"]
    assert folders_to_allow(["/srv/corpus/a/1.flac", "/data/x/2.flac"]) == ["/data/x", "/srv/corpus"]
    assert folders_to_allow([]) == []


def test_scores_hint_asks_for_predictions_only_when_predictions_are_what_is_missing(tmp_path):
    from lalmeval.data.cells import MAX_REFERENCE_CHARS

    rows = [{"id": "a", "prediction": "a b", "reference": "a b"}, {"id": "b", "prediction": "c", "reference": "c " * MAX_REFERENCE_CHARS}]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = cli("score", "--predictions", "p.jsonl", "--metric", "word_error_rate", "-o", "runs", "--run-id", "s", cwd=tmp_path)
    assert out.returncode == 3
    assert "add their predictions" not in out.stderr and "fix what the reasons above name (the data, or the rows of p.jsonl)" in out.stderr
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": "a", "prediction": "a b"}) + "\n")
    (tmp_path / "data.jsonl").write_text("".join(json.dumps({"id": i, "reference": "a b"}) + "\n" for i in ("a", "b")))
    missing = cli("score", "--predictions", "q.jsonl", "--hf-dataset", "data.jsonl", "--id-column", "id", "--modality", "text",
                  "--text-column", "reference", "--metric", "word_error_rate", "-o", "runs", "--run-id", "t", cwd=tmp_path)
    assert missing.returncode == 3 and "add their predictions to q.jsonl and score again" in missing.stderr, missing.stderr
