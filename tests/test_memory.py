"""Memory stays flat on the files users have: a parquet in one row group is read a page at a time and
a save_to_disk folder without keeping its pages; many models x datasets x metrics share one reader per
dataset, one window per endpoint and each decoded clip, while every sample still ends as one record."""

import asyncio
import gc
import hashlib
import json
import os
import random
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lalmeval.inference.feed import READ_AHEAD, AudioCache, SampleFeed
from lalmeval.results.records import AudioRef, Sample
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import DEMO, REPO, demo_rows, model

AUDIO = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


# Reads every sample of a dataset in a fresh process and reports how much its peak resident memory
# grew (VmHWM: this process's own peak, not the one the kernel's ru_maxrss inherits from its parent).
READ_ALL = textwrap.dedent("""
    import hashlib, json, sys
    sys.path.insert(0, {repo!r})
    from pathlib import Path
    import pyarrow as pa
    from lalmeval.config.schema import Filters
    from lalmeval.data.source import open_source
    from lalmeval.catalog.runspecs import Dataset, DatasetSpec

    def peak_mb():
        return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024

    path = {path!r}
    dataset = Dataset("big", "c", "t", DatasetSpec(hf_repo=path, language="en", id_column="id"), Path(path).parent / "x.json")
    source = open_source(dataset, Filters(), streaming={streaming!r})
    before, digest, count = peak_mb(), hashlib.sha1(), 0
    for sample in source.samples():
        digest.update(sample.audio[0].source)
        count += 1
    print(json.dumps({{"count": count, "sha1": digest.hexdigest(), "grew_mb": peak_mb() - before, "table": type(source.table).__name__,
                      "arrow_pool_mb": pa.default_memory_pool().max_memory() / 2**20}}))
""")


def read_all(path, streaming=False):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", READ_ALL.format(repo=str(REPO), path=str(path), streaming=streaming)],
                         capture_output=True, text=True, timeout=300, env=env)
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


@pytest.mark.slow
def test_a_streamed_folder_of_parquet_is_read_a_page_at_a_time(tmp_path):
    """`streaming: true` over parquet data files (a hub dataset, or a folder laid out like one): read
    by the page reader, not by `datasets`, whose parquet streaming decodes a whole row group at once."""
    (tmp_path / "hub").mkdir()
    data = blobs(8192, 8192, seed=2)
    pq.write_table(audio_table(data[:4096]), tmp_path / "hub" / "test-00000-of-00002.parquet")
    pq.write_table(audio_table(data[4096:]).set_column(0, "id", pa.array([f"t{i:05d}" for i in range(4096)])), tmp_path / "hub" / "test-00001-of-00002.parquet")
    got = read_all(tmp_path / "hub", streaming=True)
    assert got["table"] == "ParquetStreamTable"
    assert got["count"] == 8192 and got["sha1"] == hashlib.sha1(b"".join(data)).hexdigest()
    assert got["grew_mb"] < 32, f"streaming 64 MB of audio grew peak memory by {got['grew_mb']:.0f} MB"


@pytest.mark.slow
def test_a_save_to_disk_folder_is_read_without_keeping_its_pages(tmp_path):
    """`datasets` memory-maps the Arrow files, and every page read stays resident; read directly and
    released after each batch, 64 MB of audio grows peak memory by far less than 64 MB."""
    from datasets import Audio, Dataset

    data = blobs(8192, 8192, seed=1)
    Dataset(audio_table(data)).cast_column("audio", Audio(decode=False)).save_to_disk(str(tmp_path / "saved"))
    got = read_all(tmp_path / "saved")
    assert got["count"] == 8192 and got["sha1"] == hashlib.sha1(b"".join(data)).hexdigest()
    assert got["grew_mb"] < 32, f"reading 64 MB of audio grew peak memory by {got['grew_mb']:.0f} MB"


def samples(count, audio=True):
    return [Sample(id=f"s{i}", reference="r", audio=(AudioRef(str(DEMO / demo_rows()[i % 5]["audio"])),) if audio else ()) for i in range(count)]


def test_a_feed_reads_each_sample_once_for_every_pass_and_holds_a_bounded_window():
    """Two passes, one slow and asking for two repeats: the source is read once, both get every
    sample in order, and reading never runs more than a window ahead of the slow one."""
    read, lag = [], []

    def source():
        for sample in samples(300, audio=False):
            read.append(sample.id)
            yield sample

    async def take(reader, pause, got, slow_count):
        while (unit := await reader.get()) is not None:
            got.append(unit[0].id)
            lag.append(len(read) - len(slow_count) // 2)
            await asyncio.sleep(pause)

    async def scenario():
        feed = SampleFeed(source)
        fast, slow = feed.reader(), feed.reader(repeats=2)
        feed.start()
        got_fast, got_slow = [], []
        await asyncio.gather(take(fast, 0, got_fast, got_slow), take(slow, 0.001, got_slow, got_slow))
        return feed, got_fast, got_slow

    feed, got_fast, got_slow = asyncio.run(scenario())
    assert read == [f"s{i}" for i in range(300)]  # once, in order, however many passes read it
    assert got_fast == read and got_slow == [f"s{i // 2}" for i in range(600)]
    assert max(lag) <= feed.window + READ_AHEAD + 1  # the fast pass waited for the slow one


def test_a_pass_that_closes_no_longer_holds_the_feed_back():
    async def scenario():
        feed = SampleFeed(lambda: iter(samples(300, audio=False)))
        reader, gone = feed.reader(), feed.reader()
        feed.start()
        gone.close()  # e.g. a pass that failed before reading
        return [unit[0].id async for unit in _units(reader)]

    assert len(asyncio.run(scenario())) == 300


async def _units(reader):
    while (unit := await reader.get()) is not None:
        yield unit


def test_models_of_a_dataset_share_each_decoded_clip_and_drop_it_once_all_took_it():
    async def scenario():
        cache = AudioCache(capacity=2)
        for _ in range(3):
            cache.expect("d")
        clips = samples(4)
        shared = [await cache.get("d", clips[0], 0) for _ in range(3)]
        kept_after_all_took_it = len(cache)
        for sample in clips[1:]:  # asked for by one model only (the others' records were stored, say)
            await cache.get("d", sample, 0)
        return shared, kept_after_all_took_it, len(cache)

    (first, second, third), kept_after_all_took_it, kept_at_the_end = asyncio.run(scenario())
    assert first is second is third  # decoded and encoded once for the three models
    assert kept_after_all_took_it == 0  # all three took it: dropped at once
    assert kept_at_the_end == 2  # the capacity bounds what models that never ask leave behind


def test_clips_are_prepared_most_urgent_first_and_a_more_urgent_ask_hurries_a_queued_one():
    """One worker. Every ask is made in one turn of the loop, so the first clip is the only one started before the
    rest are queued (a finished preparation is heard of in a later turn): the model with the fewest slots (the lowest
    urgency) goes next, and a clip queued by a roomier model moves up when that model asks for it too."""
    async def scenario():
        cache = AudioCache(capacity=8, workers=1)
        for _ in range(2):
            cache.expect("d")
        clips = samples(4)
        done: list[str] = []

        async def ask(sample, urgency):
            await cache.get("d", sample, 0, urgency=urgency)
            done.append(sample.id)

        asks = [(clips[0], 64), (clips[1], 64), (clips[2], 64), (clips[3], 16), (clips[2], 8)]
        await asyncio.gather(*(ask(sample, urgency) for sample, urgency in asks))
        return done

    assert asyncio.run(scenario()) == ["s0", "s2", "s2", "s3", "s1"]


def test_a_clip_one_model_gave_up_is_still_prepared_for_another():
    """A pass's workers are cancelled (its pass failed, or the run stops) while a clip it shares with another model
    is queued or being prepared: the other model still gets the clip; one wanted by nobody is not prepared."""
    async def scenario():
        cache = AudioCache(capacity=8, workers=1)
        for _ in range(2):
            cache.expect("d")
        clips = samples(3)
        first = asyncio.ensure_future(cache.get("d", clips[0], 0))      # takes the one worker
        gone = [asyncio.ensure_future(cache.get("d", clips[1], 0)), asyncio.ensure_future(cache.get("d", clips[2], 0))]
        kept = asyncio.ensure_future(cache.get("d", clips[1], 0))       # the other model wants s1 too
        await asyncio.sleep(0)
        for task in gone:
            task.cancel()
        got = await asyncio.gather(first, kept, *gone, return_exceptions=True)
        return got, cache._running, len(cache._queue)

    (first, kept, *gone), running, queued = asyncio.run(scenario())
    assert first.seconds > 0 and kept.seconds > 0
    assert all(isinstance(g, asyncio.CancelledError) for g in gone)
    assert running == 0 and queued == 0


def test_a_clip_that_fails_for_a_waiter_gone_leaves_nothing_unretrieved(tmp_path):
    """A clip that cannot be decoded, whose only waiter was cancelled: its error is not logged as never retrieved."""
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF not audio at all" * 50)
    logged: list[str] = []

    async def scenario():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: logged.append(context["message"]))
        cache = AudioCache(capacity=0, workers=1)
        cache.expect("d")
        waiter = asyncio.ensure_future(cache.get("d", Sample(id="b", reference="r", audio=(AudioRef(str(broken)),)), 0))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        while cache._running:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
        gc.collect()
        await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert logged == []


def test_every_sample_of_a_fan_out_run_ends_as_one_record(ws):
    """3 models x 3 datasets (a one-row-group parquet, a save_to_disk folder, files listed in a jsonl)
    x 2 metrics, one endpoint per model: every pair scores every sample, each model records each once."""
    from datasets import Audio, Dataset

    rows = ws.copy_demo_audio(demo_rows(12))
    clips = [(r["id"], (ws.root / "data" / r["audio"]).read_bytes(), r["reference"]) for r in rows]
    table = pa.table({"id": [c[0] for c in clips], "audio": pa.array([{"bytes": c[1], "path": None} for c in clips], AUDIO),
                      "reference": [c[2] for c in clips]})
    pq.write_table(table, ws.root / "data" / "one.parquet")
    Dataset(table).cast_column("audio", Audio(decode=False)).save_to_disk(str(ws.root / "data" / "saved"))
    spec = {"id_column": "id"}
    ws.runspec("asr", "fan", {"one": {"hf_repo": "data/one.parquet", **spec}, "saved": {"hf_repo": "data/saved", **spec},
                              "files": {"hf_repo": ws.jsonl(rows), **spec}})
    endpoints = [ScriptedEndpoint(lambda seen, n: "set a timer", latency=0.01 * k) for k in range(3)]
    for ep in endpoints:
        ep.__enter__()
    try:
        pairs = [[d, m] for d in ("one", "saved", "files") for m in ("word_error_rate", "bleu")]
        ws.config([model(ep.url, name=f"m{k}", batch_size=2 + k) for k, ep in enumerate(endpoints)], pairs)
        result = ws.run()
    finally:
        for ep in endpoints:
            ep.__exit__(None, None, None)
    assert len(result.scores) == 18 and all(s.num_samples == 12 and s.num_failed == 0 for s in result.scores)
    for k, ep in enumerate(endpoints):
        records = [r for dataset in ("one", "saved", "files") for r in ws.records(dataset, f"m{k}")]
        assert sorted(r["id"] for r in records) == sorted(r["id"] for r in rows * 3) and all(r["error"] is None for r in records)
        # The three layouts hold the same clips: a request is sent once, or answered from the run's cache.
        assert len(ep.requests) + sum(bool(r["extra"].get("cached")) for r in records) == 36
