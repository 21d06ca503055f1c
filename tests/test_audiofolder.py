"""The hub's audiofolder layout — audio files beside a metadata.csv / .jsonl / .parquet whose
`file_name` names them, in split folders or not — read without `datasets` and torchcodec: the
metadata as a table, the clips as paths checked against the data's folders when their row is read."""

import csv
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lalmeval.media.audio import decode
from lalmeval.data.source import iter_samples, open_source
from lalmeval.config.schema import Filters
from lalmeval.errors import UserError
from tests.support.encode import speech_clip
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import DEMO, demo_rows, model


def write_metadata(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)


def split_folders(root, kind="csv"):
    """test/ and train/, each with its clips and its metadata file naming them."""
    for split, rows in (("test", demo_rows()[:4]), ("train", demo_rows()[4:7])):
        for row in rows:
            (root / split).mkdir(parents=True, exist_ok=True)
            shutil.copy(DEMO / row["audio"], root / split / f"{row['id']}.flac")
        write_metadata(root / split / f"metadata.{kind}", [{"file_name": f"{r['id']}.flac", "transcription": r["reference"], "voice": r["voice"]} for r in rows])
    return root


def dataset(ws, **spec):
    ws.runspec("asr", "folder", {"folder": {"hf_repo": "data/af", "target_column": "transcription", **spec}})
    ws.config([model("http://127.0.0.1:9/v1")], [["folder", "word_error_rate"]])
    return ws.plan().catalog.datasets["folder"]


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
def test_split_folders_with_metadata_give_the_splits_rows_with_their_clips(ws, kind):
    split_folders(ws.root / "data" / "af", kind)
    samples = list(iter_samples(dataset(ws, id_column="file_name")))
    rows = demo_rows(4)
    assert [s.id for s in samples] == [f"{r['id']}.flac" for r in rows]
    assert [s.reference for s in samples] == [r["reference"] for r in rows]
    assert [s.audio[0].source for s in samples] == [str(ws.root / "data" / "af" / "test" / f"{r['id']}.flac") for r in rows]
    train = list(iter_samples(dataset(ws, split="train")))
    assert [s.reference for s in train] == [r["reference"] for r in demo_rows()[4:7]]


def test_a_folder_without_splits_with_compressed_clips_and_a_root_metadata_file(ws):
    root = ws.root / "data" / "af"
    rows = []
    for index, (row, suffix) in enumerate(zip(demo_rows(3), [".m4a", ".webm", ".flac"])):
        speech_clip(root / "clips" / f"{row['id']}{suffix}", index=index)
        rows.append({"file_name": f"clips/{row['id']}{suffix}", "transcription": row["reference"]})
    write_metadata(root / "metadata.jsonl", rows)
    samples = list(iter_samples(dataset(ws)))
    assert [s.reference for s in samples] == [r["reference"] for r in demo_rows(3)]
    assert all(0.5 < len(decode(s.audio[0].source)) / 16000 < 6 for s in samples)


def test_without_metadata_each_clip_is_a_row_labelled_by_its_folder(ws):
    root = ws.root / "data" / "af"
    for label, rows in (("commands", demo_rows()[:2]), ("questions", demo_rows()[2:5])):
        for row in rows:
            (root / label).mkdir(parents=True, exist_ok=True)
            shutil.copy(DEMO / row["audio"], root / label / f"{row['id']}.flac")
    samples = list(iter_samples(dataset(ws, target_column="label", id_column="file_name")))
    assert [(s.id, s.reference) for s in samples] == [(f"commands/{r['id']}.flac", "commands") for r in demo_rows()[:2]] + \
        [(f"questions/{r['id']}.flac", "questions") for r in demo_rows()[2:5]]


def test_a_file_name_leading_out_of_the_folder_fails_only_its_row(ws):
    root = split_folders(ws.root / "data" / "af")
    shutil.copy(DEMO / demo_rows(1)[0]["audio"], ws.root / "outside.flac")
    rows = [{"file_name": "../../../outside.flac", "transcription": "x", "voice": "v"},
            {"file_name": f"{demo_rows(1)[0]['id']}.flac", "transcription": "y", "voice": "v"}]
    write_metadata(root / "test" / "metadata.csv", rows)
    first, second = iter_samples(dataset(ws))
    assert first.problem.startswith(f"data: audio file {root / 'test' / '../../../outside.flac'} is outside the data's folder {root}")
    assert second.problem is None and second.audio[0].source == str(root / "test" / "cmd000.flac")


def test_metadata_without_a_file_name_column_and_a_root_file_beside_split_folders_are_errors(ws):
    root = split_folders(ws.root / "data" / "af")
    write_metadata(root / "metadata.csv", [{"file_name": "test/cmd000.flac", "transcription": "x"}])
    with pytest.raises(UserError, match=r"af: dataset 'folder': metadata.csv name\(s\) no split while other files do \(test, train\)"):
        list(iter_samples(dataset(ws)))
    (root / "metadata.csv").unlink()
    write_metadata(root / "test" / "metadata.csv", [{"path": "cmd000.flac", "transcription": "x"}])
    with pytest.raises(UserError, match=r"metadata.csv: dataset 'folder': an audio folder's metadata names its files in a 'file_name' column"):
        list(iter_samples(dataset(ws)))


def test_length_filter_reads_the_named_clips_headers(ws):
    split_folders(ws.root / "data" / "af")
    data = dataset(ws, id_column="file_name")
    kept = [s.id for s in open_source(data, Filters(length_filter=[1.8, 2.5])).samples()]
    assert 0 < len(kept) < 4


def test_a_run_over_an_audio_folder_validates_answers_and_scores_every_row(ws, capsys):
    from lalmeval.cli.commands import main

    split_folders(ws.root / "data" / "af")
    dataset(ws, id_column="file_name")
    with ScriptedEndpoint(lambda seen, n: "what is the weather this weekend") as ep:
        ws.config([model(ep.url)], [["folder", "word_error_rate"]])
        assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 0
        result = ws.run()
    assert "data of folder: OK" in capsys.readouterr().out
    records = ws.records("folder", "m")
    assert sorted(r["id"] for r in records) == sorted(f"{r['id']}.flac" for r in demo_rows(4)) and all(r["error"] is None for r in records)
    assert len(ep.requests) == 4 and result.complete and result.scores[0].num_failed == 0
