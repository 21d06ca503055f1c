"""WebDataset shards (.tar files of `<key>.flac` + `<key>.json` / `<key>.txt`) read straight from the
archives, without `datasets` and torchcodec: split by shard names, columns named by extension,
fields of the json reached as `json.text`, memory holding an index and the rows in hand."""

import hashlib
import io
import json
import os
import tarfile

import pytest

from lalmeval.config.schema import Filters
from lalmeval.data.source import iter_samples, open_source
from lalmeval.errors import UserError
from lalmeval.media.audio import decode, duration
from tests.support.encode import speech_clip
from tests.support.endpoint import ScriptedEndpoint
from tests.support.read_all import read_all
from tests.support.workspace import DEMO, demo_rows, model


def add(archive, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def write_shard(path, samples):
    """samples: [(key, {extension: bytes})], written in order as webdataset's ShardWriter does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as archive:
        for key, files in samples:
            for extension, data in files.items():
                add(archive, f"{key}.{extension}", data)
    return path


def demo_samples(first, count, audio="flac"):
    out = []
    for row in demo_rows()[first : first + count]:
        clip = (DEMO / row["audio"]).read_bytes()
        meta = {"text": row["reference"], "speaker": row["voice"], "rate": row["rate"]}
        out.append((f"utt/{row['id']}", {audio: clip, "json": json.dumps(meta).encode(), "txt": row["reference"].encode()}))
    return out


@pytest.fixture
def shards(ws):
    """Two test shards and a train shard, named by split as the hub names them."""
    folder = ws.root / "data" / "wds"
    write_shard(folder / "test-000000.tar", demo_samples(0, 3))
    write_shard(folder / "test-000001.tar", demo_samples(3, 2))
    write_shard(folder / "train-000000.tar", demo_samples(5, 4))
    return folder


def dataset(ws, hf_repo="data/wds", **spec):
    ws.runspec("asr", "wds", {"wds": {"hf_repo": hf_repo, "audio_column": "flac", "target_column": "json.text", "id_column": "__key__", **spec}})
    ws.config([model("http://127.0.0.1:9/v1")], [["wds", "word_error_rate"]])
    return ws.plan().catalog.datasets["wds"]


def test_the_test_shards_are_read_in_order_with_their_clips_and_the_json_text(ws, shards):
    samples = list(iter_samples(dataset(ws)))
    rows = demo_rows(5)
    assert [s.id for s in samples] == [f"utt/{r['id']}" for r in rows]
    assert [s.reference for s in samples] == [r["reference"] for r in rows]
    assert [s.audio[0].source for s in samples] == [(DEMO / r["audio"]).read_bytes() for r in rows]
    assert all(0.5 < len(decode(s.audio[0].source)) / 16000 < 6 for s in samples)


def test_the_train_split_the_txt_column_and_a_single_shard(ws, shards):
    train = list(iter_samples(dataset(ws, split="train", target_column="txt")))
    assert [s.reference for s in train] == [r["reference"] for r in demo_rows()[5:9]]
    single = list(iter_samples(dataset(ws, hf_repo="data/wds/test-000001.tar")))
    assert [s.id for s in single] == [f"utt/{r['id']}" for r in demo_rows()[3:5]]


def test_the_columns_are_the_extensions_and_the_key_and_shard(ws, shards):
    source = open_source(dataset(ws), Filters())
    assert source.table.columns == ["flac", "json", "txt", "__key__", "__url__"]
    row = next(source.table.rows([0]))
    assert row["json"] == {"text": demo_rows(1)[0]["reference"], "speaker": "en+m3", "rate": 175}
    assert row["__url__"] == str(shards / "test-000000.tar") and row["flac"]["path"] == "utt/cmd000.flac"


def test_the_json_object_itself_is_refused_as_a_reference_naming_the_path_to_use(ws, shards):
    samples = list(iter_samples(dataset(ws, target_column="json")))
    assert samples[0].problem == ("data: json: an object (keys: text, speaker, rate) is not a text (a cell is never scored "
                                  "as its JSON); map the column that holds the text")


def test_a_split_the_shards_lack_and_a_broken_shard_are_one_line_errors(ws, shards):
    with pytest.raises(UserError, match=r"wds: dataset 'wds': split 'validation' not found \(have: test, train\)"):
        list(iter_samples(dataset(ws, split="validation")))
    (shards / "test-000002.tar").write_bytes(b"not a tar archive" * 100)
    with pytest.raises(UserError, match=r"test-000002.tar: not a readable uncompressed tar shard"):
        list(iter_samples(dataset(ws)))


def test_a_sample_with_two_files_of_one_extension_is_an_error(ws):
    clip = (DEMO / demo_rows(1)[0]["audio"]).read_bytes()
    write_shard(ws.root / "data" / "wds" / "test.tar", [("a", {"flac": clip, "txt": b"x"}), ("a", {"flac": clip})])
    with pytest.raises(UserError, match=r"test.tar: sample 'a' has two files named .flac"):
        list(iter_samples(dataset(ws)))


def test_length_filter_and_compressed_clips_in_shards(ws):
    """m4a clips in a shard: their lengths come from their headers, and they decode through PyAV."""
    samples = []
    for index, row in enumerate(demo_rows(4)):
        clip = speech_clip(ws.root / f"{row['id']}.m4a", index=index).read_bytes()
        samples.append((row["id"], {"m4a": clip, "json": json.dumps({"text": row["reference"]}).encode()}))
    write_shard(ws.root / "data" / "wds" / "test.tar", samples)
    data = dataset(ws, audio_column="m4a")
    assert all(0.5 < len(decode(s.audio[0].source)) / 16000 < 6 for s in iter_samples(data))
    lengths = {s.id: duration(s.audio[0].source) for s in iter_samples(data)}  # what the filter reads: the headers
    low = sorted(lengths.values())[1] - 0.01
    kept = [s.id for s in open_source(data, Filters(length_filter=[low, 60])).samples()]
    assert kept == [i for i, seconds in lengths.items() if seconds >= low] and len(kept) == 3


def test_a_run_over_shards_validates_answers_and_scores_every_sample(ws, shards, capsys):
    from lalmeval.cli.commands import main

    dataset(ws)
    with ScriptedEndpoint(lambda seen, n: "what is the weather this weekend") as ep:
        ws.config([model(ep.url)], [["wds", "word_error_rate"]])
        assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 0
        result = ws.run()
    assert "data of wds: OK (5 columns, 5 sample(s) selected)" in capsys.readouterr().out
    records = ws.records("wds", "m")
    assert sorted(r["id"] for r in records) == sorted(f"utt/{r['id']}" for r in demo_rows(5))
    assert all(r["error"] is None for r in records) and len(ep.requests) == 5
    assert result.complete and result.scores[0].num_samples == 5 and result.scores[0].num_failed == 0


@pytest.mark.slow
def test_reading_64_mb_of_shards_holds_the_rows_in_hand_not_the_shards(tmp_path):
    """8192 samples of 8 KB in two shards: every sample is read, and peak memory grows by far less than the data."""
    blobs = [os.urandom(8192) for _ in range(8192)]
    for half in range(2):
        part = range(half * 4096, (half + 1) * 4096)
        write_shard(tmp_path / "wds" / f"test-{half:06d}.tar",
                    [(f"s{i:05d}", {"wav": blobs[i], "json": json.dumps({"text": "x"}).encode()}) for i in part])
    got = read_all(tmp_path / "wds", {"id_column": "__key__", "audio_column": "wav", "target_column": "json.text"})
    assert got["count"] == 8192 and got["sha1"] == hashlib.sha1(b"".join(blobs)).hexdigest()
    assert got["grew_mb"] < 24, f"reading 64 MB of shards grew peak memory by {got['grew_mb']:.0f} MB"
