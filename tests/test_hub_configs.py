"""Parquet files laid out by hub configuration — `{config}/{split}/0000.parquet` as the hub's parquet
conversion (refs/convert/parquet) writes them, `{config}/{split}-00000-of-00001.parquet` and
`data/{split}-*.parquet` as push_to_hub does, or named by a README's `configs:` — chosen by subset and
split, never merged across configurations: from a local snapshot folder and from the hub cache."""

import hashlib
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from lalmeval.data.configs import Layout, by_config, card_layout
from lalmeval.data.source import iter_samples
from lalmeval.errors import UserError
from tests.support.endpoint import ScriptedEndpoint
from tests.support.hubcache import cached_repo, use_cache
from tests.support.read_all import read_all
from tests.support.workspace import DEMO, demo_rows, model

AUDIO = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def part(rows, config):
    """A parquet table of demo rows as the hub stores audio: {bytes, path} structs."""
    return pa.table({"id": [f"{config}-{r['id']}" for r in rows],
                     "audio": pa.array([{"bytes": (DEMO / r["audio"]).read_bytes(), "path": r["audio"]} for r in rows], AUDIO),
                     "text": [r["reference"] for r in rows]})


def converted_snapshot(root):
    """A snapshot of refs/convert/parquet: two configurations; clean's test split in two files."""
    rows = demo_rows(12)
    layout = {"clean/test/0000.parquet": (rows[0:2], "clean"), "clean/test/0001.parquet": (rows[2:4], "clean"),
              "clean/validation/0000.parquet": (rows[4:6], "clean"), "other/test/0000.parquet": (rows[6:9], "other")}
    for path, (part_rows, config) in layout.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(part(part_rows, config), root / path)
    return root


def pushed_repo(root):
    """A repository as `datasets` push_to_hub leaves it: shards written by `datasets` with an
    Audio(decode=False) feature, and a README whose `configs:` the library itself writes — the
    default configuration in data/, `accented` in its own folder with two splits."""
    from datasets import Audio, Dataset
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard, DatasetCardData

    shards = {("default", "data", "test"): demo_rows(3), ("accented", "accented", "test"): demo_rows()[3:5],
              ("accented", "accented", "validation"): demo_rows()[5:7]}
    configs = {}
    for (config, folder, split), rows in shards.items():
        ds = Dataset.from_dict({"id": [f"{config}-{r['id']}" for r in rows], "text": [r["reference"] for r in rows],
                                "audio": [{"bytes": (DEMO / r["audio"]).read_bytes(), "path": r["audio"]} for r in rows]})
        ds = ds.cast_column("audio", Audio(decode=False))  # stored as {bytes, path}: nothing for torchcodec to encode
        (root / folder).mkdir(parents=True, exist_ok=True)
        ds.to_parquet(str(root / folder / f"{split}-00000-of-00001.parquet"))
        configs.setdefault(config, {"data_files": []})["data_files"].append({"split": split, "path": f"{folder}/{split}-*"})
    card_data = DatasetCardData()
    MetadataConfigs(configs).to_dataset_card_data(card_data)
    (root / "README.md").write_text(DatasetCard(f"---\n{card_data.to_yaml()}\n---\n# speech\n").content + "\n")
    return root


def samples(ws, streaming=False, **spec):
    ws.runspec("asr", "hub", {"ls": {"hf_repo": "data/snap", "target_column": "text", "id_column": "id", **spec}})
    ws.config([model("http://127.0.0.1:9/v1")], [["ls", "word_error_rate"]])
    return list(iter_samples(ws.plan().catalog.datasets["ls"], streaming=streaming))


@pytest.mark.parametrize("streaming", [False, True])
def test_subset_and_split_choose_one_configurations_files_in_order(ws, streaming):
    converted_snapshot(ws.root / "data" / "snap")
    clean = samples(ws, streaming, subset="clean")
    assert [s.id for s in clean] == [f"clean-{r['id']}" for r in demo_rows(4)]
    assert [s.reference for s in clean] == [r["reference"] for r in demo_rows(4)]
    assert [s.audio[0].source for s in clean] == [(DEMO / r["audio"]).read_bytes() for r in demo_rows(4)]
    other = samples(ws, streaming, subset="other")
    assert [s.id for s in other] == [f"other-{r['id']}" for r in demo_rows()[6:9]]
    assert [s.id for s in samples(ws, streaming, subset="clean", split="validation")] == [f"clean-{r['id']}" for r in demo_rows()[4:6]]


@pytest.mark.parametrize("spec,problem", [
    ({}, "snap: dataset 'ls': the data has 2 configurations (clean, other); name one with subset — configurations are never merged"),
    ({"subset": "noisy"}, "snap: dataset 'ls': subset 'noisy' not found (configurations: clean, other)"),
    ({"subset": "other", "split": "validation"}, "snap: dataset 'ls': split 'validation' not found in configuration 'other' (have: test)"),
])
def test_a_missing_or_unknown_configuration_or_split_is_an_error_naming_what_there_is(ws, spec, problem):
    converted_snapshot(ws.root / "data" / "snap")
    with pytest.raises(UserError) as caught:
        samples(ws, **spec)
    assert str(caught.value).endswith(problem)


def test_a_run_without_subset_over_several_configurations_is_exit_2_naming_them(ws, capsys):
    from lalmeval.cli.commands import main

    converted_snapshot(ws.root / "data" / "snap")
    ws.runspec("asr", "hub", {"ls": {"hf_repo": "data/snap", "target_column": "text", "id_column": "id"}})
    with ScriptedEndpoint(lambda seen, n: "x") as ep:
        ws.config([model(ep.url)], [["ls", "word_error_rate"]])
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--output-dir", str(ws.root / "runs"), "--run-id", "t"])
        assert ep.requests == []
    err = capsys.readouterr().err
    assert code == 2 and "the data has 2 configurations (clean, other); name one with subset" in err, err
    assert len([line for line in err.splitlines() if line.strip()]) == 1 and "Traceback" not in err, err


def test_push_to_hub_layout_with_a_default_configuration_and_a_single_configuration_snapshot(ws):
    root = ws.root / "data" / "snap"
    for path, rows, config in (("data/test-00000-of-00001.parquet", demo_rows(2), "default"),
                               ("accented/test-00000-of-00002.parquet", demo_rows()[2:4], "accented"),
                               ("accented/test-00001-of-00002.parquet", demo_rows()[4:5], "accented")):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(part(rows, config), root / path)
    assert [s.id for s in samples(ws, subset="default")] == [f"default-{r['id']}" for r in demo_rows(2)]
    assert [s.id for s in samples(ws, subset="accented")] == [f"accented-{r['id']}" for r in demo_rows()[2:5]]
    (root / "data/test-00000-of-00001.parquet").unlink()
    assert [s.id for s in samples(ws)] == [f"accented-{r['id']}" for r in demo_rows()[2:5]]  # one configuration: no subset needed


def test_configurations_in_folders_under_data(ws):
    root = ws.root / "data" / "snap"
    for path, rows, config in (("data/clean/test-00000-of-00001.parquet", demo_rows(2), "clean"),
                               ("data/noisy/test-00000-of-00001.parquet", demo_rows()[2:5], "noisy")):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(part(rows, config), root / path)
    assert [s.id for s in samples(ws, subset="noisy")] == [f"noisy-{r['id']}" for r in demo_rows()[2:5]]
    with pytest.raises(UserError, match=r"subset 'data' not found \(configurations: clean, noisy\)$"):
        samples(ws, subset="data")


def test_the_readme_configs_name_the_files_of_each_configuration_and_split(ws):
    pushed_repo(ws.root / "data" / "snap")
    default = samples(ws)  # the README's `default` configuration: no subset needed
    assert [s.id for s in default] == [f"default-{r['id']}" for r in demo_rows(3)]
    assert [s.audio[0].source for s in default] == [(DEMO / r["audio"]).read_bytes() for r in demo_rows(3)]
    assert [s.id for s in samples(ws, subset="accented")] == [f"accented-{r['id']}" for r in demo_rows()[3:5]]
    assert [s.id for s in samples(ws, True, subset="accented", split="validation")] == [f"accented-{r['id']}" for r in demo_rows()[5:7]]
    with pytest.raises(UserError, match=r"snap: dataset 'ls': subset 'clean' not found \(configurations: accented, default\)$"):
        samples(ws, subset="clean")
    with pytest.raises(UserError, match=r"split 'train' not found in configuration 'default' \(have: test\)$"):
        samples(ws, split="train")


def test_a_readme_split_whose_data_files_match_nothing_says_which_patterns(ws):
    root = pushed_repo(ws.root / "data" / "snap")
    (root / "accented" / "validation-00000-of-00001.parquet").unlink()
    with pytest.raises(UserError, match=r"split 'validation' of configuration 'accented': its data_files \(accented/validation-\*\) match no file$"):
        samples(ws, subset="accented", split="validation")


def test_a_readme_configuration_of_jsonl_files_is_read_by_datasets_as_the_card_says(ws):
    root = ws.root / "data" / "snap"
    root.mkdir(parents=True)
    for config, rows in (("first", demo_rows(2)), ("second", demo_rows()[2:5])):
        ws.jsonl([{"id": f"{config}-{r['id']}", "text": r["reference"]} for r in rows], f"data/snap/{config}/eval.jsonl")
    (root / "README.md").write_text("---\nconfigs:\n- config_name: first\n  data_files:\n  - split: test\n    path: first/*.jsonl\n"
                                    "- config_name: second\n  data_files:\n  - split: test\n    path: second/*.jsonl\n---\n")
    got = samples(ws, subset="second", modality="text", textual_input_column="text", audio_column=None)
    assert [s.id for s in got] == [f"second-{r['id']}" for r in demo_rows()[2:5]]
    with pytest.raises(UserError, match=r"subset 'third' not found \(configurations: first, second\)$"):
        samples(ws, subset="third", modality="text", textual_input_column="text", audio_column=None)


def test_validate_checks_the_chosen_configuration(ws, capsys):
    from lalmeval.cli.commands import main

    converted_snapshot(ws.root / "data" / "snap")
    ws.runspec("asr", "hub", {"ls": {"hf_repo": "data/snap", "target_column": "text", "id_column": "id", "subset": "clean"}})
    ws.config([model("http://127.0.0.1:9/v1")], [["ls", "word_error_rate"]])
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 0
    assert "data of ls: OK (3 columns, 4 sample(s) selected)" in capsys.readouterr().out


def seconds(path):
    info = sf.info(str(path))
    return round(info.frames / info.samplerate, 2)


def test_a_run_sends_each_clip_of_the_chosen_configuration_decoded_from_its_struct(ws):
    """Every clip sent is the chosen configuration's own, decoded by soundfile from the {bytes, path}
    struct: the endpoint answers each clip's transcript by its length, so the WER is 0 only if so."""
    pushed_repo(ws.root / "data" / "snap")
    by_length = {seconds(DEMO / r["audio"]): r["reference"] for r in demo_rows()}
    ws.runspec("asr", "hub", {"ls": {"hf_repo": "data/snap", "target_column": "text", "id_column": "id", "subset": "accented"}})
    with ScriptedEndpoint(lambda seen, n: by_length.get(round(seen.audio_seconds[0], 2), "?")) as ep:
        ws.config([model(ep.url)], [["ls", "word_error_rate"]])
        result = ws.run()
    assert sorted(round(s.audio_seconds[0], 2) for s in ep.requests) == sorted(seconds(DEMO / r["audio"]) for r in demo_rows()[3:5])
    assert sorted(r["id"] for r in ws.records("ls", "m")) == [f"accented-{r['id']}" for r in demo_rows()[3:5]]
    score = result.scores[0]
    assert (score.num_samples, score.num_failed, score.score) == (2, 0, 0.0)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    return use_cache(monkeypatch, tmp_path / "hub-cache")


@pytest.mark.parametrize("revision", [None, "refs/convert/parquet"])
def test_a_hub_id_reads_the_configuration_from_the_hub_cache_offline(ws, cache, capsys, revision):
    from lalmeval.cli.commands import main

    cached_repo(cache, "acme/speech", converted_snapshot(ws.root / "made"), revision or "main")
    extra = {"revision": revision} if revision else {}
    ws.runspec("asr", "hub", {"ls": {"hf_repo": "hub:acme/speech", "target_column": "text", "id_column": "id", "subset": "other", **extra}})
    ws.config([model("http://127.0.0.1:9/v1")], [["ls", "word_error_rate"]])
    got = list(iter_samples(ws.plan().catalog.datasets["ls"]))
    assert [s.id for s in got] == [f"other-{r['id']}" for r in demo_rows()[6:9]]
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 0
    assert "data of ls: OK (3 columns; a hub dataset's rows are read by the run)" in capsys.readouterr().out  # the chosen file's footer


def test_a_configuration_the_hub_cache_lacks_is_exit_2_naming_those_it_holds(ws, cache, capsys):
    from lalmeval.cli.commands import main

    cached_repo(cache, "acme/speech", converted_snapshot(ws.root / "made"))
    ws.runspec("asr", "hub", {"ls": {"hf_repo": "hub:acme/speech", "target_column": "text", "id_column": "id", "subset": "noisy"}})
    ws.config([model("http://127.0.0.1:9/v1")], [["ls", "word_error_rate"]])
    assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("dataset 'ls': 'acme/speech': subset 'noisy' not found (configurations: clean, other) in the local hub cache"), err
    assert "\n" not in err


@pytest.mark.parametrize("paths,configs", [
    (["clean/test/0000.parquet", "other/test/0000.parquet", ".gitattributes"], {"clean": {"test": ["clean/test/0000.parquet"]},
                                                                                "other": {"test": ["other/test/0000.parquet"]}}),
    (["clean/partial-train/0000.parquet"], {"clean": {"partial-train": ["clean/partial-train/0000.parquet"]}}),
    (["data/clean/test-00000-of-00001.parquet", "data/noisy/test/0000.parquet"],
     {"clean": {"test": ["data/clean/test-00000-of-00001.parquet"]}, "noisy": {"test": ["data/noisy/test/0000.parquet"]}}),
    (["data/test-00000-of-00001.parquet"], None),          # the default configuration alone: a folder of split files
    (["data/test/0000.parquet", "data/train/0000.parquet"], None),
    (["test/0000.parquet", "train/0000.parquet"], None),    # a folder per split
    (["test-00000-of-00001.parquet"], None),
    (["clean/test/0000.parquet", "clean/test.jsonl"], None),  # not parquet throughout
    (["clean/0000.parquet"], None),
])
def test_which_file_lists_are_laid_out_by_configuration(paths, configs):
    assert by_config(paths) == (Layout(configs) if configs else None)


@pytest.mark.parametrize("data_files,split,files", [
    ("a/*.parquet", "train", ["a/0.parquet", "a/1.parquet"]),                       # a pattern alone: split train
    (["a/0.parquet", "b/**/*.parquet"], "train", ["a/0.parquet", "b/0.parquet", "b/x/y/0.parquet"]),
    ([{"split": "test", "path": ["b/x/*/*", "a/*.parquet"]}], "test", ["b/x/y/0.parquet", "a/0.parquet", "a/1.parquet"]),  # pattern order
    ([{"split": "test", "path": "*/0.parquet"}], "test", ["a/0.parquet", "b/0.parquet"]),  # * stays inside one folder
])
def test_readme_data_files_patterns_match_as_the_hub_resolves_them(data_files, split, files):
    listed = ["README.md", "a/0.parquet", "a/1.parquet", "b/0.parquet", "b/x/y/0.parquet", ".hidden/0.parquet"]
    layout = card_layout([{"config_name": "c", "data_files": data_files}], listed)
    assert layout.configs == {"c": {split: files}} and layout.default == "c"


def test_readme_reading_options_data_dir_or_urls_leave_the_configuration_to_datasets():
    layout = card_layout([{"config_name": "a", "data_files": "a/*.csv", "sep": ";"}, {"config_name": "b", "data_dir": "b"},
                          {"config_name": "c", "data_files": "./c/*.parquet", "default": True},
                          {"config_name": "d", "data_files": "hf://datasets/x/y@main/d/0.parquet"}], ["a/0.csv", "b/test.parquet", "c/0.parquet"])
    assert layout.options == {"a", "b", "d"} and layout.default == "c" and layout.configs["c"] == {"train": ["c/0.parquet"]}


def test_reading_a_64_mb_configuration_holds_a_page_not_the_files_and_converts_nothing(tmp_path):
    """8192 clips of 8 KB in two files of one configuration, each written in one row group: every
    clip is read, peak memory grows by far less than the data, and `datasets` caches no copy."""
    blobs = [os.urandom(8192) for _ in range(8192)]
    for half in range(2):
        rows = range(half * 4096, (half + 1) * 4096)
        table = pa.table({"id": [f"s{i}" for i in rows], "text": ["x"] * 4096,
                          "audio": pa.array([{"bytes": blobs[i], "path": f"{i}.wav"} for i in rows], AUDIO)})
        (tmp_path / "repo" / "big" / "test").mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp_path / "repo" / "big" / "test" / f"{half:04d}.parquet", row_group_size=4096)
    (tmp_path / "repo" / "small").mkdir()
    pq.write_table(table.slice(0, 10), tmp_path / "repo" / "small" / "test.parquet")  # another configuration, never read
    got = read_all(tmp_path / "repo", {"id_column": "id", "audio_column": "audio", "target_column": "text", "subset": "big"}, env={"HF_DATASETS_CACHE": str(tmp_path / "datasets-cache")})
    assert got["count"] == 8192 and got["sha1"] == hashlib.sha1(b"".join(blobs)).hexdigest()
    assert got["grew_mb"] < 24, f"reading a 64 MB configuration grew peak memory by {got['grew_mb']:.0f} MB"
    assert not any((tmp_path / "datasets-cache").rglob("*.arrow"))


def test_a_configs_glob_matching_a_link_to_a_file_outside_the_dataset_folder_is_refused(ws):
    root = pushed_repo(ws.root / "data" / "snap")
    elsewhere = ws.root / "elsewhere"
    elsewhere.mkdir()
    shard = root / "accented" / "validation-00000-of-00001.parquet"
    shard.rename(elsewhere / "secret.parquet")
    shard.symlink_to(elsewhere / "secret.parquet")
    with pytest.raises(UserError, match=r"is a link to .*secret\.parquet, outside the dataset's folder .*snap: a dataset reads only its own files"):
        samples(ws, subset="accented", split="validation")
    assert [s.id for s in samples(ws, subset="accented")] == [f"accented-{r['id']}" for r in demo_rows()[3:5]]   # its own files still read


@pytest.mark.parametrize("front, problem", [("configs: [unclosed\n", "is not YAML (line "),
                                            ("- just\n- a list\n", "is YAML but not a mapping of keys")])
def test_a_dataset_card_whose_front_matter_is_broken_is_an_error_not_ignored(ws, front, problem):
    root = pushed_repo(ws.root / "data" / "snap")
    (root / "README.md").write_text(f"---\n{front}---\n# speech\n")
    with pytest.raises(UserError) as raised:
        samples(ws, subset="accented")
    message = str(raised.value)
    assert message.startswith(f"{root / 'README.md'}: the dataset card's front matter (between its --- lines) {problem}"), message
    assert "\n" not in message and message.endswith("fix it, or remove it to have the files read by their places")
