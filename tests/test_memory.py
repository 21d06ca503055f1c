"""Memory stays flat on the files users have: a parquet in one row group is read a page at a time and
a save_to_disk folder without keeping its pages."""

import hashlib
import json
import random
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq

from tests.support.workspace import REPO

AUDIO = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


# Reads every sample of a dataset in a fresh process and reports how much its peak resident memory
# grew (VmHWM: this process's own peak, not the one the kernel's ru_maxrss inherits from its parent).
READ_ALL = textwrap.dedent("""
    import hashlib, json, sys
    sys.path.insert(0, {repo!r})
    from pathlib import Path
    import pyarrow as pa
    from lalmeval.config import Filters
    from lalmeval.data.source import open_source
    from lalmeval.runspecs import Dataset, DatasetSpec

    def peak_mb():
        return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024

    path = {path!r}
    dataset = Dataset("big", "c", "t", DatasetSpec(hf_repo=path, language="en", id_column="id"), Path(path).parent / "x.json")
    source = open_source(dataset, Filters())
    before, digest, count = peak_mb(), hashlib.sha1(), 0
    for sample in source.samples():
        digest.update(sample.audio[0].source)
        count += 1
    print(json.dumps({{"count": count, "sha1": digest.hexdigest(), "grew_mb": peak_mb() - before,
                      "arrow_pool_mb": pa.default_memory_pool().max_memory() / 2**20}}))
""")


def read_all(path):
    out = subprocess.run([sys.executable, "-c", READ_ALL.format(repo=str(REPO), path=str(path))], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def blobs(count, size, seed=0):
    """Distinct incompressible clips' worth of bytes (a parquet writer cannot fold them together)."""
    rng = random.Random(seed)
    return [rng.randbytes(size) for _ in range(count)]


def audio_table(data):
    return pa.table({"id": [f"s{i:05d}" for i in range(len(data))], "audio": pa.array([{"bytes": b, "path": None} for b in data], AUDIO),
                     "reference": ["x"] * len(data)})


def test_a_parquet_in_one_row_group_is_read_a_page_at_a_time(tmp_path):
    """64 MB of audio in ONE row group (pq.write_table's default, pages of 1024 rows = 8 MB): reading
    every sample holds a page or two, not the row group (the whole group would be 64 MB, decoded 128+)."""
    data = blobs(8192, 8192)
    path = tmp_path / "one_group.parquet"
    pq.write_table(audio_table(data), path)
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    got = read_all(path)
    assert got["count"] == 8192 and got["sha1"] == hashlib.sha1(b"".join(data)).hexdigest()
    assert got["grew_mb"] < 32, f"reading 64 MB of audio grew peak memory by {got['grew_mb']:.0f} MB"
    assert got["arrow_pool_mb"] < 16, f"Arrow held {got['arrow_pool_mb']:.0f} MB at once"


def test_a_save_to_disk_folder_is_read_without_keeping_its_pages(tmp_path):
    """`datasets` memory-maps the Arrow files, and every page read stays resident; read directly and
    released after each batch, 64 MB of audio grows peak memory by far less than 64 MB."""
    from datasets import Audio, Dataset

    data = blobs(8192, 8192, seed=1)
    Dataset(audio_table(data)).cast_column("audio", Audio(decode=False)).save_to_disk(str(tmp_path / "saved"))
    got = read_all(tmp_path / "saved")
    assert got["count"] == 8192 and got["sha1"] == hashlib.sha1(b"".join(data)).hexdigest()
    assert got["grew_mb"] < 32, f"reading 64 MB of audio grew peak memory by {got['grew_mb']:.0f} MB"
