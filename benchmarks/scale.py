"""Scale of a whole run through `bash evaluate.sh`: memory, time to first request, throughput, fan-out.

    python benchmarks/scale.py [--only SCENARIOS] [--repeat N] [--interpreter PYTHON]

parquet100    100 clips of 3-7 s as FLAC bytes in a parquet of row groups of 100, zero-latency
              endpoint: time to first request after `bash evaluate.sh` starts, wall time, peak RSS.
parquet2000   the same with 2000 clips.
onegroup2000  2000 distinct clips of 3-7 s in a parquet of ONE row group (as pyarrow and pandas
              write it), 64-slot endpoint at 0 ms and at 200 ms; lalmeval and the raw-client floor
              (benchmarks/raw_client.py: the same requests from a minimal aiohttp client) take turns,
              each reported with its CPU seconds, wall time, peak RSS and time to first request;
              then one more lalmeval run under benchmarks/cpu_profile.py: where its CPU goes, per request.
clips20000    20 000 distinct one-second clips in three layouts: one-row-group parquet,
              save_to_disk folder (Arrow), many small files listed in a jsonl.
stream100k    100 000 one-second clips listed in a jsonl: RSS sampled through the run (flat?).
fanout        3 models x 4 datasets (one per layout) x 2 metrics (WER, binary LLM judge), three
              endpoints of 64/32/16 slots x 100 ms and a judge: peak RSS, each endpoint's share of
              its ideal (the busiest one decides the run's length).
slots         2000 clips of 5 s, endpoint 64 slots x 200 ms, batch_size 64: inference phase vs ideal.
replicas      two replicas, one 3x slower: share of requests each served; then one killed mid-run.
Each run is a fresh process (warm environment: the venv exists, files are in the page cache). With two
CPUs or more, endpoints run on the last one and the client on the others (the fan-out's client on any).
CPU seconds are the client process's own (user + system, all its threads), from the kernel.
Clips are real speech (demo utterances); the *2000/*20000/fanout ones are all different clips, as
in a real dataset (a parquet writer's dictionary would fold repeated clips into one).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import soundfile as sf
import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "private_datasets" / "demo_commands"
REFERENCE = "set a timer for five minutes"
INSTRUCTION = "Transcribe the audio."  # the raw client sends the same
SPEECH_3_7 = [3 + 4 * i / 49 for i in range(50)]  # clip lengths in seconds


def make_flacs(folder: Path, seconds: list[float]) -> list[Path]:
    """One FLAC per length, chaining demo utterances (real speech)."""
    paths = []
    for index, length in enumerate(seconds):
        path = folder / f"clip{index:03d}.flac"
        path.write_bytes(flac(index, length))
        paths.append(path)
    return paths


@lru_cache(maxsize=1)
def speech() -> np.ndarray:
    """Every demo utterance, chained (about 80 s of real speech at 16 kHz)."""
    rows = [json.loads(line) for line in (DEMO / "demo_commands.jsonl").read_text().splitlines()]
    return np.concatenate([sf.read(DEMO / row["audio"], dtype="float32")[0] for row in rows])


def flac(index: int, seconds: float) -> bytes:
    """FLAC bytes of `seconds` of speech starting at a place that depends on `index` (distinct clips)."""
    audio, frames = speech(), int(seconds * 16000)
    start = (index * 7919) % (len(audio) - frames)
    out = io.BytesIO()
    sf.write(out, audio[start : start + frames], 16000, format="FLAC")
    return out.getvalue()


def clips(count: int, lengths: list[float], shift: int = 0) -> Iterator[tuple[str, bytes]]:
    """(id, FLAC bytes) of `count` distinct clips, their lengths cycling through `lengths`."""
    for i in range(count):
        yield f"s{i:06d}", flac(i + shift, lengths[(i + shift) % len(lengths)])


def make_data(layout: str, work: Path, name: str, count: int, lengths: list[float], shift: int = 0) -> str:
    """Write a dataset in a separate process; returns its path relative to `work`.

    Not in this process: a child started from a process that once held the data inherits its peak
    memory in the peak RSS the kernel reports for the child (the high-water mark of the address
    space it replaced at exec), which would then measure the generator, not lalmeval."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_write_layout, layout, work, name, count, lengths, shift).result()


def _write_layout(layout: str, work: Path, name: str, count: int, lengths: list[float], shift: int) -> str:
    return LAYOUTS[layout](work, name, clips(count, lengths, shift))


def _audio_schema():
    import pyarrow as pa

    return pa.schema([("id", pa.string()), ("audio", pa.struct([("bytes", pa.binary()), ("path", pa.string())])), ("reference", pa.string())])


def write_parquet(path: Path, clip_paths: list[Path], rows: int) -> float:
    """`rows` rows whose audio struct holds the bytes of clips[i % len], in row groups of 100; returns MB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    blobs = [clip.read_bytes() for clip in clip_paths]
    schema = _audio_schema()
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, 100):
            batch = [{"id": f"s{i:06d}", "audio": {"bytes": blobs[i % len(blobs)], "path": None}, "reference": REFERENCE} for i in range(start, min(rows, start + 100))]
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
    return path.stat().st_size / 1e6


def layout_onegroup(work: Path, name: str, items: Iterator[tuple[str, bytes]]) -> str:
    """A parquet as `pq.write_table` (and pandas) writes it by default: one row group."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": i, "audio": {"bytes": b, "path": None}, "reference": REFERENCE} for i, b in items]
    pq.write_table(pa.Table.from_pylist(rows, schema=_audio_schema()), work / f"{name}.parquet")
    return f"{name}.parquet"


def layout_groups(work: Path, name: str, items: Iterator[tuple[str, bytes]]) -> str:
    """A parquet of row groups of 100 rows (as `datasets` writes audio)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetWriter(work / f"{name}.parquet", _audio_schema()) as writer:
        batch = []
        for sample_id, data in items:
            batch.append({"id": sample_id, "audio": {"bytes": data, "path": None}, "reference": REFERENCE})
            if len(batch) == 100:
                writer.write_table(pa.Table.from_pylist(batch, schema=_audio_schema()))
                batch = []
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=_audio_schema()))
    return f"{name}.parquet"


def layout_disk(work: Path, name: str, items: Iterator[tuple[str, bytes]]) -> str:
    """A `Dataset.save_to_disk` folder (Arrow files; audio an Audio(decode=False) feature holding {bytes, path})."""
    import pyarrow as pa
    from datasets import Audio, Dataset

    rows = [{"id": i, "audio": {"bytes": b, "path": None}, "reference": REFERENCE} for i, b in items]
    # Built from Arrow and cast: encoding through the Audio feature would need torchcodec.
    Dataset(pa.Table.from_pylist(rows, schema=_audio_schema())).cast_column("audio", Audio(decode=False)).save_to_disk(str(work / name))
    return name


def layout_files(work: Path, name: str, items: Iterator[tuple[str, bytes]]) -> str:
    """One FLAC file per sample, listed in a jsonl (paths relative to it)."""
    folder = work / name
    folder.mkdir()
    with (work / f"{name}.jsonl").open("w") as listing:
        for sample_id, data in items:
            (folder / f"{sample_id}.flac").write_bytes(data)
            listing.write(json.dumps({"id": sample_id, "audio": f"{name}/{sample_id}.flac", "reference": REFERENCE}) + "\n")
    return f"{name}.jsonl"


LAYOUTS = {"one-row-group parquet": layout_onegroup, "parquet, row groups of 100": layout_groups,
           "save_to_disk folder": layout_disk, "files + jsonl": layout_files}


def size_mb(path: Path) -> float:
    return (sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size) / 1e6


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_split() -> tuple[Optional[set[int]], Optional[set[int]]]:
    """(the client's CPUs, the endpoints' CPUs): the endpoints get the last CPU and the client the others, so the
    client's cost is not hidden by the endpoint's, nor slowed by it; (None, None) on one CPU or without affinity."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None, None
    return (set(cpus[:-1]), {cpus[-1]}) if len(cpus) >= 2 else (None, None)


def pinned(cpus: Optional[set[int]]):
    """A preexec_fn that pins the child to `cpus` (None: no pinning)."""
    return None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))


def start_endpoint(latency: float, capacity: int, reply: str = REFERENCE) -> tuple[subprocess.Popen, str]:
    """A benchmark endpoint in its own process, on the endpoints' CPU (see cpu_split)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "endpoint.py"), "--port", str(port), "--latency", str(latency),
                             "--capacity", str(capacity), "--reply", reply], preexec_fn=pinned(cpu_split()[1]))
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1)
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("benchmark endpoint did not start")


def stats_of(base: str) -> dict:
    return json.load(urllib.request.urlopen(base + "/stats"))


def write_config(work: Path, data: "str | dict[str, str]", models: list[dict], metrics: tuple[str, ...] = ("word_error_rate",), **extra) -> Path:
    """A config over one data file (dataset `bench_set`) or {dataset name: data file}."""
    datasets = {"bench_set": data} if isinstance(data, str) else data
    (work / "runspecs" / "bench").mkdir(parents=True, exist_ok=True)
    spec = {name: {"hf_repo": f"../../{path}", "language": "en", "id_column": "id", "metrics": list(metrics), "instruction": INSTRUCTION}
            for name, path in datasets.items()}
    (work / "runspecs" / "bench" / "bench.json").write_text(json.dumps(spec))
    pairs = [[name, metric] for name in datasets for metric in metrics]
    config = {"dataset_metric": pairs, "models": models, "runspec_dirs": ["runspecs"], "output_dir": str(work / "runs"), **extra}
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


INTERPRETER: Optional[str] = None   # --interpreter: run `INTERPRETER -m lalmeval run` in this checkout, not `bash evaluate.sh`


def lalmeval_command(*arguments: str) -> tuple[list[str], dict[str, str]]:
    """The command (and environment) that runs `lalmeval run` with `arguments` as a user would: `bash evaluate.sh`,
    or with --interpreter that Python on this checkout (for a checkout whose environment was set up elsewhere)."""
    if INTERPRETER is None:
        return ["bash", "evaluate.sh", *arguments], dict(os.environ)
    return [INTERPRETER, "-m", "lalmeval", "run", *arguments], {**os.environ, "PYTHONPATH": str(REPO)}


def measure(command: list[str], env: Optional[dict[str, str]] = None, cpus: Optional[set[int]] = None, sample_rss: bool = False) -> dict:
    """Run `command` (pinned to `cpus`): wall time, exit code, and the process's own CPU seconds (user + system,
    its threads and children included) and peak RSS, as the kernel counts them."""
    started = time.time()
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=pinned(cpus))
    trace: list[tuple[float, float]] = []
    done = threading.Event()
    if sample_rss:
        threading.Thread(target=_sample_rss, args=(proc.pid, started, trace, done), daemon=True).start()
    stdout_lines: list[str] = []
    stderr_lines: list[str] = []
    readers = [threading.Thread(target=lambda: stdout_lines.extend(proc.stdout), daemon=True),
               threading.Thread(target=lambda: stderr_lines.extend(proc.stderr), daemon=True)]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own figures, not the endpoint's
    done.set()
    for reader in readers:
        reader.join(5)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"started": started, "wall": time.time() - started, "code": proc.returncode, "cpu": usage.ru_utime + usage.ru_stime,
            "peak_mb": usage.ru_maxrss / 1024, "trace": trace, "stdout": "".join(stdout_lines[-20:]), "stderr": "".join(stderr_lines[-5:])}


def evaluate(config: Path, run_id: str, sample_rss: bool = False, cpus: Optional[set[int]] = None) -> dict:
    """Run lalmeval on `config` as a user would; wall time, exit code, CPU seconds and peak RSS of its process."""
    command, env = lalmeval_command("--config", str(config), "--run-id", run_id, "--no-cache")
    return measure(command, env, cpus, sample_rss)


def _sample_rss(pid: int, started: float, trace: list, done: threading.Event) -> None:
    while not done.is_set():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    trace.append((time.time() - started, int(line.split()[1]) / 1024))
        except OSError:
            return
        done.wait(0.5)


def final(work: Path, run_id: str) -> dict:
    return json.loads((work / "runs" / run_id / "final_scores.json").read_text())["scores"][0]


def all_scores(work: Path, run_id: str) -> list[dict]:
    return json.loads((work / "runs" / run_id / "final_scores.json").read_text())["scores"]


def model(base: str, name: str = "bench", batch: int = 64, **extra) -> dict:
    """A model entry; entries with the same name are replicas of one model."""
    return {"name": name, "url": base + "/v1", "model": "bench", "batch_size": batch, "timeout": 60, **extra}


def _spread(values: list[float], digits: int = 0) -> str:
    """'median (min-max)' of repeated measurements."""
    ordered = sorted(values)
    median = ordered[len(ordered) // 2] if len(ordered) % 2 else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2
    return f"{median:.{digits}f}" + (f" ({ordered[0]:.{digits}f}-{ordered[-1]:.{digits}f})" if len(ordered) > 1 else "")


def stop_endpoint(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(10)


def zero_latency_run(work: Path, data: str, rows: int, run_id: str) -> dict:
    """One lalmeval run over `data` against a fresh zero-latency 64-slot endpoint; every sample must be scored."""
    return client_round(work, data, rows, 0.0, run_id)


def client_round(work: Path, data: str, rows: int, latency: float, run_id: Optional[str] = None, profile: Optional[Path] = None) -> dict:
    """One client against a fresh 64-slot endpoint of `latency` seconds, the client on the client's CPUs: lalmeval
    (`run_id`; under benchmarks/cpu_profile.py writing `profile` when given), or else benchmarks/raw_client.py.
    Every sample must be answered (and, by lalmeval, scored). `first`: seconds from start to the first request."""
    proc, base = start_endpoint(latency, 64)
    try:
        if run_id is None:
            out = measure([sys.executable, str(REPO / "benchmarks" / "raw_client.py"), "--data", str(work / data), "--url", base + "/v1"],
                          cpus=cpu_split()[0])
        else:
            arguments = ("--config", str(write_config(work, data, [model(base)])), "--run-id", run_id, "--no-cache")
            command, env = lalmeval_command(*arguments)
            if profile is not None:  # in-process under the sampler: the Python evaluate.sh would run
                python = INTERPRETER or str(REPO / ".venv" / "bin" / "python")
                command, env = [python, str(REPO / "benchmarks" / "cpu_profile.py"), str(profile), "run", *arguments], {**os.environ, "PYTHONPATH": str(REPO)}
            out = measure(command, env, cpu_split()[0])
        stats = stats_of(base)
    finally:
        stop_endpoint(proc)
    if run_id is None:
        assert out["code"] == 0 and json.loads(out["stdout"])["answered"] == rows, out
    else:
        score = final(work, run_id)
        assert out["code"] == 0 and score["num_samples"] == rows and score["num_failed"] == 0, (out, score)
    return {**out, "first": stats["first_arrival"] - out["started"]}


def parquet_run(work: Path, label: str, rows: int, seconds: list[float], repeat: int) -> None:
    """`rows` clips (cycling through `seconds`) as FLAC in a parquet of row groups of 100, zero-latency endpoint."""
    mb = write_parquet(work / f"{label}.parquet", make_flacs(work, seconds), rows)
    runs = [zero_latency_run(work, f"{label}.parquet", rows, f"{label}-{attempt}") for attempt in range(repeat)]
    walls = [r["wall"] for r in runs]
    print(f"{label:<12} {rows} clips of {min(seconds):g}-{max(seconds):g} s ({mb:.0f} MB of FLAC in a parquet), zero latency, "
          f"{repeat} run(s), median (range): first request {_spread([r['first'] for r in runs], 2)} s after `bash evaluate.sh` started; "
          f"wall {_spread(walls, 1)} s; {_spread([rows / wall for wall in walls])} samples/s end to end; peak RSS {_spread([r['peak_mb'] for r in runs])} MB")


def parquet100(work: Path, repeat: int = 1) -> None:
    parquet_run(work, "parquet100", 100, [3 + 4 * i / 49 for i in range(50)], repeat)


def parquet2000(work: Path, repeat: int = 1) -> None:
    parquet_run(work, "parquet2000", 2000, [3 + 4 * i / 49 for i in range(50)], repeat)


def _figures(runs: list[dict]) -> str:
    return (f"CPU {_spread([r['cpu'] for r in runs], 2)} s, wall {_spread([r['wall'] for r in runs], 1)} s, "
            f"peak RSS {_spread([r['peak_mb'] for r in runs])} MB, first request {_spread([r['first'] for r in runs], 2)} s")


def onegroup2000(work: Path, repeat: int = 1) -> None:
    """2000 distinct clips of 3-7 s in one row group, at 0 and 200 ms: lalmeval and the raw client take turns
    (drift on a shared machine then falls on both alike); then one lalmeval run under the CPU sampler."""
    data = make_data("one-row-group parquet", work, "onegroup", 2000, SPEECH_3_7)
    client, endpoint = cpu_split()
    where = f"client on CPU {sorted(client)}, endpoint on CPU {sorted(endpoint)}" if client else "not pinned (one CPU)"
    fixed = fixed_cost(work, repeat)
    for latency in (0.0, 0.2):
        ours, raw = [], []
        for attempt in range(repeat):
            ours.append(client_round(work, data, 2000, latency, f"onegroup-{latency:g}-{attempt}"))
            raw.append(client_round(work, data, 2000, latency))
        ratios = [o["cpu"] / r["cpu"] for o, r in zip(ours, raw)]
        print(f"onegroup2000 2000 distinct clips of 3-7 s ({size_mb(work / data):.0f} MB parquet, one row group), {latency * 1000:.0f} ms x 64 slots, "
              f"{repeat} interleaved round(s), {where}, median (range):\n"
              f"             lalmeval   {_figures(ours)}\n"
              f"             raw client {_figures(raw)}\n"
              f"             lalmeval's CPU / the raw client's: {_spread(ratios, 2)} by round; "
              f"load average at the end {os.getloadavg()[0]:.1f}", flush=True)
        if not latency:
            per = [f"{name} {1e3 * (_median([r['cpu'] for r in runs]) - fixed[name]) / 1999:.2f} ms" for name, runs in (("lalmeval", ours), ("raw client", raw))]
            print(f"             CPU per request beyond a one-clip run's: {', '.join(per)}", flush=True)
    breakdown(work, data, 2000)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) / 2


def fixed_cost(work: Path, repeat: int) -> dict[str, float]:
    """Median CPU seconds of a run over one clip (starting, reading the config, reporting), both clients in turns."""
    data = make_data("one-row-group parquet", work, "oneclip", 1, SPEECH_3_7)
    ours, raw = [], []
    for attempt in range(repeat):
        ours.append(client_round(work, data, 1, 0.0, f"oneclip-{attempt}"))
        raw.append(client_round(work, data, 1, 0.0))
    print(f"oneclip      the same over ONE clip (what a run costs beyond its requests), median (range):\n"
          f"             lalmeval   {_figures(ours)}\n"
          f"             raw client {_figures(raw)}", flush=True)
    return {"lalmeval": _median([r["cpu"] for r in ours]), "raw client": _median([r["cpu"] for r in raw])}


def breakdown(work: Path, data: str, rows: int) -> None:
    """One more zero-latency lalmeval run under benchmarks/cpu_profile.py: where its CPU goes, per request."""
    path = work / "cpu_profile.json"
    out = client_round(work, data, rows, 0.0, "onegroup-profiled", profile=path)
    stages = json.loads(path.read_text())["stages"]
    sampled = sum(stages.values())
    print(f"             where lalmeval's CPU goes at 0 ms (one more run, sampled: {sampled:.2f} s of the process's {out['cpu']:.2f} s; "
          f"µs per request, share):")
    for stage, seconds in sorted(stages.items(), key=lambda item: -item[1]):
        print(f"               {stage:<38} {seconds * 1e6 / rows:7.0f} µs  {100 * seconds / sampled:4.1f}%")


def clips20000(work: Path, repeat: int = 1) -> None:
    """20 000 distinct one-second clips in each layout users have."""
    for layout in ("one-row-group parquet", "save_to_disk folder", "files + jsonl"):
        name = layout.split()[0].replace("-", "")
        data = make_data(layout, work, name, 20000, [1.0 + i / 500 for i in range(50)])
        runs = [zero_latency_run(work, data, 20000, f"{name}-{attempt}") for attempt in range(repeat)]
        walls = [r["wall"] for r in runs]
        print(f"clips20000   20 000 distinct 1 s clips, {layout} ({size_mb(work / data.removesuffix('.jsonl')):.0f} MB), {repeat} run(s): "
              f"first request {_spread([r['first'] for r in runs], 2)} s; {_spread([20000 / w for w in walls])} samples/s; "
              f"peak RSS {_spread([r['peak_mb'] for r in runs])} MB")


def stream100k(work: Path) -> None:
    paths = make_flacs(work, [1.0 + i / 500 for i in range(50)])
    rows = "".join(json.dumps({"id": f"s{i:06d}", "audio": paths[i % 50].name, "reference": REFERENCE}) + "\n" for i in range(100_000))
    (work / "set100k.jsonl").write_text(rows)
    proc, base = start_endpoint(0.0, 64)
    try:
        out = evaluate(write_config(work, "set100k.jsonl", [model(base)]), "s100k", sample_rss=True)
    finally:
        stop_endpoint(proc)
    score = final(work, "s100k")
    assert out["code"] == 0 and score["num_samples"] == 100_000 and score["num_failed"] == 0, (out, score)
    trace = out["trace"]
    marks = [trace[min(len(trace) - 1, int(len(trace) * q))] for q in (0.1, 0.25, 0.5, 0.75, 0.99)]
    print(f"stream100k   100 000 one-second clips (jsonl of paths): {100_000 / out['wall']:.0f} samples/s ({out['wall']:.0f} s); "
          f"RSS at 10/25/50/75/99% of the run: {' / '.join(f'{mb:.0f}' for _, mb in marks)} MB; peak {out['peak_mb']:.0f} MB")


def slots(work: Path) -> None:
    write_parquet(work / "set5s.parquet", make_flacs(work, [5.0] * 50), 2000)
    proc, base = start_endpoint(0.2, 64)
    try:
        out = evaluate(write_config(work, "set5s.parquet", [model(base)]), "slots")
        stats = stats_of(base)
    finally:
        stop_endpoint(proc)
    assert out["code"] == 0, out
    ideal = 2000 / 64 * 0.2
    busy = stats["last_end"] - stats["first_start"]
    print(f"slots        2000 clips x 5 s, endpoint 64 slots x 200 ms: busy span {busy:.2f} s vs ideal {ideal:.2f} s -> "
          f"{ideal / busy:.3f} of ideal (max in flight {stats['max_in_flight']}); whole run {out['wall']:.2f} s")


def replicas(work: Path) -> None:
    write_parquet(work / "set1000.parquet", make_flacs(work, [2.0 + i / 50 for i in range(50)]), 1000)
    fast, fast_url = start_endpoint(0.1, 16)
    slow, slow_url = start_endpoint(0.3, 16)
    try:
        config = write_config(work, "set1000.parquet", [model(fast_url, "bench", 16), model(slow_url, "bench", 16)])   # one model, two replicas
        out = evaluate(config, "split")
        served = stats_of(fast_url)["requests"], stats_of(slow_url)["requests"]
    finally:
        fast.terminate()
        slow.terminate()
    assert out["code"] == 0, out
    print(f"replicas     1000 clips, two replicas of 16 slots, 100 ms vs 300 ms: fast served {served[0]} "
          f"({100 * served[0] / sum(served):.0f}%), slow {served[1]}; {out['wall']:.1f} s")
    fast, fast_url = start_endpoint(0.1, 16)
    doomed, doomed_url = start_endpoint(0.1, 16)
    try:
        config = write_config(work, "set1000.parquet", [model(fast_url, "bench", 16, retry_attempts=1), model(doomed_url, "bench", 16, retry_attempts=1)])
        threading.Timer(2.0, doomed.kill).start()  # dies with requests in flight
        out = evaluate(config, "killed")
    finally:
        fast.terminate()
    score = final(work, "killed")
    print(f"             same, one replica killed 2 s into the run: {score['num_samples']} samples, {score['num_failed']} failed, "
          f"exit code {out['code']}; {out['wall']:.1f} s")


def fanout(work: Path) -> None:
    """3 models x 4 datasets (one per layout, 500 clips of 3-7 s each) x WER and a binary judge."""
    data = {f"set_{i}": make_data(layout, work, f"set{i}", 500, SPEECH_3_7, shift=1000 * i) for i, layout in enumerate(LAYOUTS)}
    shapes = {"a": (64, 0.1), "b": (32, 0.1), "c": (16, 0.1)}
    started = {name: start_endpoint(latency, slots) for name, (slots, latency) in shapes.items()}
    judge, judge_url = start_endpoint(0.0, 64, reply="The answer matches. Rating: 1")
    try:
        models = [model(started[name][1], name, slots, model=name) for name, (slots, _) in shapes.items()]
        properties = {"judge_model": "bench", "judge_api_endpoint": judge_url + "/v1", "judge_concurrency": 64}
        out = evaluate(write_config(work, data, models, ("word_error_rate", "llm_judge_binary"), judge_properties=properties), "fanout")
        stats = {name: stats_of(base) for name, (_, base) in started.items()}
    finally:
        for proc, _ in [*started.values(), (judge, judge_url)]:
            stop_endpoint(proc)
    scores = all_scores(work, "fanout")
    assert out["code"] == 0 and len(scores) == 24 and all(s["num_samples"] == 500 and s["num_failed"] == 0 for s in scores), (out, scores)
    shares = {name: (stats[name]["requests"] / slots * latency) / (stats[name]["last_end"] - stats[name]["first_start"])
              for name, (slots, latency) in shapes.items()}
    busiest = max(shapes, key=lambda n: stats[n]["requests"] / shapes[n][0] * shapes[n][1])
    first = min(s["first_arrival"] for s in stats.values()) - out["started"]
    # The client is not pinned here: the busiest endpoint's share is about wall time, and the run needs more than one core.
    print(f"fanout       3 models x 4 datasets x 2 metrics (WER, binary judge), 6000 requests + 6000 judgments, endpoints on CPU "
          f"{sorted(cpu_split()[1] or [])}, lalmeval on any: wall {out['wall']:.1f} s (CPU {out['cpu']:.1f} s, "
          f"{out['cpu'] * 1e3 / 12000:.2f} ms per request or judgment); first request {first:.2f} s; load average at the end {os.getloadavg()[0]:.1f}; "
          f"peak RSS {out['peak_mb']:.0f} MB; share of ideal " + ", ".join(f"{n} ({shapes[n][0]} slots) {v:.3f}" for n, v in shares.items())
          + f"; busiest ({busiest}) {shares[busiest]:.3f}")


SCENARIOS = {"parquet100": parquet100, "parquet2000": parquet2000, "onegroup2000": onegroup2000, "clips20000": clips20000,
             "stream100k": stream100k, "fanout": fanout, "slots": slots, "replicas": replicas}
REPEATED = {"parquet100", "parquet2000", "onegroup2000", "clips20000"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each repeated scenario (the shared VM varies run to run)")
    parser.add_argument("--interpreter", help="run `INTERPRETER -m lalmeval run` on this checkout instead of `bash evaluate.sh` "
                                              "(a checkout whose environment was set up elsewhere)")
    args = parser.parse_args()
    global INTERPRETER
    INTERPRETER = args.interpreter
    print(f"[{time.strftime('%Y-%m-%d %H:%M %Z')}]", flush=True)
    for name in args.only.split(","):
        # Time figures need a quiet machine; the load says how quiet it was (RSS figures do not depend on it).
        print(f"[{name}: load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs]", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            if name in REPEATED:
                SCENARIOS[name](Path(tmp), args.repeat)
            else:
                SCENARIOS[name](Path(tmp))


if __name__ == "__main__":
    main()
