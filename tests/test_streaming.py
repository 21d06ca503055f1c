"""Streaming: rows are read as they are needed, so memory follows the read-ahead window, not the dataset;
nothing is launched when every answer is already stored; progress shows even a short run."""

import json
import re
import subprocess
import sys
import textwrap

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import REPO, model

# VmHWM, not ru_maxrss: the kernel's ru_maxrss of a child includes the peak of the process that
# started it (the address space it replaced at exec), here the test runner's own hundreds of MB.
PEAK_RSS = textwrap.dedent("""
    import sys
    sys.path.insert(0, {repo!r})
    path = {path!r}
    import pyarrow.parquet
    from lalmeval.config.schema import Filters
    from lalmeval.data.source import open_source
    from lalmeval.catalog.runspecs import Dataset, DatasetSpec
    from pathlib import Path
    def peak_kb():
        return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
    dataset = Dataset("big", "c", "t", DatasetSpec(hf_repo=path, language="en", id_column="id"), Path(path).parent / "x.json")
    before = peak_kb()
    source = open_source(dataset, Filters())
    count = sum(1 for sample in source.samples() if sample.audio)
    print(count, len(source.ids), before // 1024, peak_kb() // 1024)
""")


def write_parquet(path, rows):
    """`rows` rows of 200 kB of (distinct) audio bytes, in row groups of 16."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    blob = os.urandom(200_000)
    schema = pa.schema([("id", pa.string()), ("audio", pa.struct([("bytes", pa.binary()), ("path", pa.string())])), ("reference", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, 16):
            batch = [{"id": str(i), "audio": {"bytes": blob[i:] + blob[:i], "path": None}, "reference": "x"} for i in range(start, min(rows, start + 16))]
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))


def peak_reading(path):
    out = subprocess.run([sys.executable, "-c", PEAK_RSS.format(repo=str(REPO), path=str(path))], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    count, selected, _, peak_mb = map(int, out.stdout.split())
    assert count == selected
    return count, peak_mb


def test_reading_a_parquet_holds_a_row_group_not_the_dataset(tmp_path):
    """Peak memory is the same for 160 and 640 rows of 200 kB (32 vs 128 MB): it follows the row group."""
    write_parquet(tmp_path / "small.parquet", 160)  # written here: the measuring process only reads
    write_parquet(tmp_path / "large.parquet", 640)
    (small, small_peak), (large, large_peak) = peak_reading(tmp_path / "small.parquet"), peak_reading(tmp_path / "large.parquet")
    assert (small, large) == (160, 640)
    assert large_peak - small_peak < 40, f"96 MB more rows grew peak memory from {small_peak} to {large_peak} MB"


def questions(ws, count):
    rows = [{"id": f"q{i}", "question": f"question w{i}", "reference": f"echo: w{i}"} for i in range(count)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})


def test_no_server_is_launched_when_every_answer_is_already_stored(ws):
    import socket

    questions(ws, 6)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = REPO / "tests" / "support" / "slow_server.py"
    entry = model(f"http://127.0.0.1:{port}/v1", launch=f"{sys.executable} {server} --port {port} --delay 0.01", launch_timeout=60)
    config = ws.config([entry], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    run = lambda: subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "r", "--no-cache"],  # noqa: E731
                                 cwd=REPO, capture_output=True, text=True, timeout=120)
    first = run()
    assert first.returncode == 0, first.stderr
    log = ws.root / "runs" / "r" / "launch_m.log"
    log.unlink()
    again = run()
    assert again.returncode == 0, again.stderr
    assert not log.exists(), "the server was launched although every answer was stored"
    assert "Reused 6 stored prediction(s)" in again.stderr


def test_a_short_run_still_shows_its_progress(ws):
    questions(ws, 3)
    with ScriptedEndpoint(lambda seen, n: "echo: " + seen.text.split()[-1]) as ep:
        config = ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "p"],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    runs = [i for i, line in enumerate(lines) if re.match(r"\[\s*\d+s\] \d+/3 done", line)]
    assert len(runs) >= 2   # the first state and the last, one block each
    last = lines[runs[-1]:]
    assert last[0].split("] ")[1].startswith("3/3 done (100%), all requested, elapsed")
    assert "  qs × m: 3/3 — done" in last and f"  m {ep.url}: 0 in flight (limit 4/4), 0 retries" in last
    assert json.loads((ws.root / "runs" / "p" / "final_scores.json").read_text())["scores"][0]["score"] == 100.0



def record(i, error=None):
    from lalmeval.results.records import Record

    return Record(id=f"s{i}", prompt="p", system=None, params={}, reference="r", prediction=None if error else "x" * 1000, error=error)


def test_the_record_stream_drops_what_every_reader_has_taken():
    import asyncio

    from lalmeval.inference.job import RecordStream

    async def scenario():
        stream = RecordStream()
        fast, slow = stream.subscribe(), stream.subscribe()
        seen = {fast: 0, slow: 0}
        for i in range(5000):
            stream.push(record(i, error="HTTP 500: boom" if i % 1000 == 0 else None))
        stream.close()
        async for batch in stream.batches(fast):
            seen[fast] += len(batch)
        held_for_slow = len(stream._buffer)
        async for batch in stream.batches(slow):
            seen[slow] += len(batch)
        return stream, seen, held_for_slow

    stream, seen, held_for_slow = asyncio.run(scenario())
    assert seen == {0: 5000, 1: 5000} and held_for_slow == 5000  # the slow reader still gets everything
    assert stream._buffer == [] and stream.lag() == 0
    assert (stream.count, stream.failed, dict(stream.failure_kinds)) == (5000, 5, {"HTTP 500": 5})


def test_inference_waits_for_a_reader_that_falls_behind():
    import asyncio

    from lalmeval.inference.job import RecordStream

    async def scenario():
        stream, stop = RecordStream(), asyncio.Event()
        reader = stream.subscribe()
        pushed = 0

        async def producer():
            nonlocal pushed
            for i in range(300):
                await stream.room(stop, limit=100)
                stream.push(record(i))
                pushed += 1
            stream.close()

        task = asyncio.ensure_future(producer())
        await asyncio.sleep(0.05)
        stalled_at = pushed  # nobody has read yet: the producer waits at the limit
        taken = 0
        async for batch in stream.batches(reader, max_size=10):
            taken += len(batch)
            assert stream.lag() <= 100
        await task
        return stalled_at, taken

    stalled_at, taken = asyncio.run(scenario())
    assert (stalled_at, taken) == (100, 300)


def test_a_stopped_run_does_not_wait_for_a_reader():
    import asyncio

    from lalmeval.inference.job import RecordStream

    async def scenario():
        stream, stop = RecordStream(), asyncio.Event()
        stream.subscribe()
        for i in range(10):
            stream.push(record(i))
        waiting = asyncio.ensure_future(stream.room(stop, limit=5))
        await asyncio.sleep(0.02)
        assert not waiting.done()
        stop.set()
        await asyncio.wait_for(waiting, 5)

    asyncio.run(scenario())



def streamed_folder(ws, rows, second_shard=None):
    """A hub-layout folder of parquet shards, read with `streaming: true`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = ws.root / "data" / "hubstyle"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "test-00000.parquet")
    if second_shard is not None:
        (folder / "test-00001.parquet").write_bytes(second_shard)
    ws.runspec("qa", "questions", {"qs": {"hf_repo": "data/hubstyle", "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})


@pytest.mark.parametrize("fault", ["late duplicate id", "unreadable second shard"])
def test_a_streamed_dataset_that_breaks_off_is_never_exit_0(ws, fault, capsys):
    """40 streamed rows whose read breaks off at the end (row 40 repeats id q2, or the second shard
    is not parquet): every row delivered before the break is answered (none of a read-ahead batch is
    dropped), the scores say they cover only those rows, and the run exits 2 naming the problem.
    (How many rows a broken shard lets through depends on the reader's batch: the count is said.)"""
    import re

    from lalmeval.cli.commands import main
    from tests.support.endpoint import answer_by_number

    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(40)]
    if fault == "late duplicate id":
        rows[39]["id"] = "q2"
        streamed_folder(ws, rows)
        why = "duplicate sample id 'q2'"
    else:
        streamed_folder(ws, rows, b"PAR1 this is not a parquet file")
        why = "Parquet magic bytes not found"
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"), streaming=True)
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        sent = len(ep.requests)
    printed = capsys.readouterr()
    err = printed.err
    data = json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())
    score = data["scores"][0]
    broke = score["details"]["data_broke_off"]
    read = int(re.match(r"the data broke off after (\d+) row\(s\)", broke).group(1))
    assert code == 2 and sent == read and why in broke, err
    if fault == "late duplicate id":
        assert read == 39  # rows 33-39, read in the same batch as the duplicate, are answered too
    assert score["num_samples"] == read and score["num_failed"] == 0 and score["score"] in (100.0, None)
    assert data["broken_off"]["qs"] == broke
    assert f"error: dataset 'qs': {broke.rstrip('.')}; the samples after the break" in err and "could not be read to the end" in err
    # Every report marks the scores partial, as the console does.
    run_dir = ws.root / "runs" / "t"
    assert "PARTIAL: the run stopped early" in printed.out
    assert all(line.endswith(",true") for line in (run_dir / "results.csv").read_text().splitlines()[1:]), (run_dir / "results.csv").read_text()
    assert "could not be read to the end" in (run_dir / "results.md").read_text()
    assert "This run is partial (the data of qs could not be read to the end)" in (run_dir / "report.html").read_text()


def test_a_lingering_reader_takes_what_arrives_meanwhile_in_one_batch_and_leaves_at_the_end():
    import asyncio
    import time

    from lalmeval.inference.job import RecordStream
    from lalmeval.results.records import Record

    def record(i):
        return Record(id=str(i), prompt="", system=None, params={}, reference=None, prediction="x")

    async def scenario():
        stream = RecordStream()
        reader = stream.subscribe()

        async def producer():
            for i in range(10):  # one record every 10 ms, then the pass ends
                stream.push(record(i))
                await asyncio.sleep(0.01)
            stream.close()

        task = asyncio.ensure_future(producer())
        sizes, started = [], time.monotonic()
        async for batch in stream.batches(reader, linger=5.0):
            sizes.append([r.id for r in batch])
        await task
        return sizes, time.monotonic() - started

    sizes, took = asyncio.run(scenario())
    assert sizes == [[str(i) for i in range(10)]]   # one batch, not ten
    assert took < 2.0                               # the end of the pass, not the linger, released it
