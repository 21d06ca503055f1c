"""`lalmeval run --hf-dataset REPO ...`: a dataset evaluated without a runspec, declared on the fly as a runspec entry.

The hub is offline here, so local data stands in for a hub id: a parquet file, and a folder laid out
like a hub repository (a README declaring configs), which goes through `datasets.load_dataset` as a
hub id does. The real hub id fails the way a hub id fails without network: in one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import DEMO, demo_rows
from tests.test_cli import assert_one_line_error


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=cwd, capture_output=True, text=True, timeout=240)


def hub_rows(start: int, count: int) -> list[dict]:
    """Rows as the hub stores a speech set: an audio struct {bytes, path} and its transcript in `text`."""
    return [{"audio": {"bytes": (DEMO / r["audio"]).read_bytes(), "path": Path(r["audio"]).name}, "text": r["reference"], "key": r["id"]}
            for r in demo_rows(start + count)[start:]]


def hub_snapshot(root: Path) -> Path:
    """A folder laid out like a hub repository: configs clean and other, each with a test split, and the README declaring them."""
    from datasets import Audio
    from datasets import Dataset as HFDataset

    for config, rows in (("clean", hub_rows(0, 3)), ("other", hub_rows(3, 2))):
        (root / config).mkdir(parents=True)
        HFDataset.from_list(rows).cast_column("audio", Audio()).to_parquet(str(root / config / "test-00000-of-00001.parquet"))
    lines = ["---", "configs:"] + [line for c in ("clean", "other") for line in
                                    (f"- config_name: {c}", "  data_files:", "  - split: test", f"    path: {c}/test-*")]
    (root / "README.md").write_text("\n".join(lines + ["---", ""]))
    return root


def models_yaml(folder: Path, url: str, **extra) -> Path:
    """A config that only names the models (and where runs go), as a user keeps one beside the data."""
    path = folder / "models.yaml"
    path.write_text(yaml.safe_dump({"models": [{"name": "asr", "url": url, "model": "whisper", "batch_size": 2}], "output_dir": "runs", **extra}))
    return path


def final(folder: Path, run_id: str) -> dict:
    return json.loads((folder / "runs" / run_id / "final_scores.json").read_text())


def test_a_hub_snapshot_folder_runs_by_subset_and_split_through_load_dataset(tmp_path):
    snapshot = hub_snapshot(tmp_path / "librispeech_asr")
    with ScriptedEndpoint(lambda seen, n: "turn on the lights") as ep:
        models_yaml(tmp_path, ep.url)
        out = cli("run", "--hf-dataset", "librispeech_asr", "--subset", "clean", "--split", "test", "--audio-column", "audio",
                  "--target-column", "text", "--metric", "word_error_rate", "--config", "models.yaml", "--run-id", "r", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "--language not given, so 'librispeech_asr_clean_test' is read as English" in out.stderr
    score = final(tmp_path, "r")["scores"][0]
    assert (score["dataset"], score["metric"], score["num_samples"], score["num_failed"]) == ("librispeech_asr_clean_test", "word_error_rate", 3, 0)
    assert score["score"] > 0 and len(ep.requests) == 3 and all(len(s.audio_seconds) == 1 for s in ep.requests)   # config clean only
    stored = yaml.safe_load((tmp_path / "runs" / "r" / "config.yaml").read_text())
    assert stored["dataset_metric"] == [["librispeech_asr_clean_test", "word_error_rate"]]
    assert stored["datasets"]["librispeech_asr_clean_test"] == {
        "hf_repo": str(snapshot), "language": "english", "metrics": ["word_error_rate"], "subset": "clean", "split": "test",
        "audio_column": "audio", "target_column": "text"}


def test_a_parquet_file_with_a_model_url_and_no_config_and_the_stored_config_runs_again(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "data").mkdir()
    pq.write_table(pa.Table.from_pylist(hub_rows(0, 4)), tmp_path / "data" / "cmds.parquet")
    with ScriptedEndpoint(lambda seen, n: "what is the weather this weekend") as ep:
        out = cli("run", "--hf-dataset", "data/cmds.parquet", "--target-column", "text", "--id-column", "key", "--metric", "word_error_rate",
                  "--instruction", "Write down the command.", "--language", "en", "--model-url", ep.url, "--model", "asr-1",
                  "--output-dir", "runs", "--run-id", "r", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert {s.text for s in ep.requests} == {"Write down the command."} and len(ep.requests) == 4
        records = [json.loads(x) for x in (tmp_path / "runs" / "r" / "records" / "cmds_test__asr-1.jsonl").read_text().splitlines()]
        assert sorted(r["id"] for r in records) == ["cmd000", "cmd001", "cmd002", "cmd003"]
        # The run's config.yaml holds the dataset and the model: it runs as it stands, from anywhere.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        again = cli("run", "--config", str(tmp_path / "runs" / "r" / "config.yaml"), "--output-dir", str(tmp_path / "runs"), "--run-id", "r2",
                    "--no-cache", cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    assert final(tmp_path, "r2")["scores"][0]["score"] == final(tmp_path, "r")["scores"][0]["score"]


def test_a_hub_id_without_network_fails_in_one_line_naming_it(tmp_path):
    """The command a user types for LibriSpeech; here the hub is unreachable, so it stops at once, in one line."""
    with ScriptedEndpoint() as ep:
        models_yaml(tmp_path, ep.url)
        out = cli("run", "--hf-dataset", "openslr/librispeech_asr", "--subset", "clean", "--split", "test", "--audio-column", "audio",
                  "--target-column", "text", "--metric", "word_error_rate", "--config", "models.yaml", cwd=tmp_path)
        assert ep.requests == []
    assert out.returncode == 2
    assert "dataset 'librispeech_asr_clean_test': cannot load 'openslr/librispeech_asr'" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("flags, fragment", [
    (["--language", "klingon", "--metric", "word_error_rate"], "--hf-dataset: dataset 'cmds_test': language: "),
    (["--language", "en", "--metric", "word_eror_rate"], "--metrics: unknown metric 'word_eror_rate' (did you mean 'word_error_rate'?)"),
    (["--language", "en"], "--hf-dataset needs --metric"),
    (["--language", "en", "--metric", "word_error_rate", "--datasets", "demo_commands"], "--hf-dataset declares the dataset to run"),
    (["--language", "en", "--metric", "word_error_rate", "--model-url", "ftp://x"], "--model-url: 'ftp://x' is not an http:// or https:// URL"),
], ids=["language", "metric", "no metric", "with datasets", "model url"])
def test_a_bad_declaration_is_one_line_naming_the_flag(tmp_path, flags, fragment):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(hub_rows(0, 1)), tmp_path / "cmds.parquet")
    model = [] if "--model-url" in flags else ["--model-url", "http://127.0.0.1:9/v1"]
    out = cli("run", "--hf-dataset", "cmds.parquet", "--target-column", "text", *flags, *model, "--model", "m", cwd=tmp_path)
    assert_one_line_error(out, fragment)


def test_a_column_the_data_lacks_is_named_with_the_columns_it_has(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(hub_rows(0, 1)), tmp_path / "cmds.parquet")
    with ScriptedEndpoint() as ep:
        out = cli("run", "--hf-dataset", "cmds.parquet", "--target-column", "transcript", "--metric", "word_error_rate", "--language", "en",
                  "--model-url", ep.url, "--model", "m", "--output-dir", "runs", cwd=tmp_path)
        assert ep.requests == []
    assert_one_line_error(out, "dataset 'cmds_test': target_column 'transcript' not found (columns: audio, key, text)")


def test_a_subset_on_a_single_file_is_refused_as_a_runspec_would_refuse_it(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(hub_rows(0, 1)), tmp_path / "cmds.parquet")
    out = cli("run", "--hf-dataset", "cmds.parquet", "--subset", "clean", "--target-column", "text", "--metric", "word_error_rate",
              "--language", "en", "--model-url", "http://127.0.0.1:9/v1", "--model", "m", "--output-dir", "runs", cwd=tmp_path)
    assert_one_line_error(out, "subset 'clean' names a hub configuration, but cmds.parquet is a single data file")


def test_dataset_flags_without_hf_dataset_are_refused(tmp_path):
    assert_one_line_error(cli("run", "--audio-column", "audio", "--model-url", "http://127.0.0.1:9/v1", "--model", "m", cwd=tmp_path),
                          "--audio-column describes the dataset of --hf-dataset, which is not given")
