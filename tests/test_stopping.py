"""A run stops cleanly whatever stops it — SIGTERM, a second Ctrl-C, a full disk, a second run on its
directory — keeping what it wrote, stopping what it launched, and saying how to go on."""

import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lalmeval.errors import WriteFailed
from lalmeval.results.store import write_atomic
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import REPO, model

COUNT = 12


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def text_dataset(ws, count=COUNT):
    rows = [{"id": f"q{i}", "question": f"question w{i}", "reference": f"echo: w{i}"} for i in range(count)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})


def launched_config(ws, port, delay=0.3, progress_bytes=0, batch_size=2, **extra):
    launch = f"{sys.executable} {REPO / 'tests' / 'support' / 'slow_server.py'} --port {port} --delay {delay} --progress-bytes {progress_bytes}"
    entry = model(f"http://127.0.0.1:{port}/v1", batch_size=batch_size, launch=launch, launch_timeout=60)
    return ws.config([entry], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"), **extra)


def start(config, run_id, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", run_id, "--no-cache"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def record_lines(ws, run_id):
    path = ws.root / "runs" / run_id / "records" / "qs__m.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line torn by the failure
    return out


def wait_for_records(ws, run_id, proc, count, limit=60):
    deadline = time.time() + limit
    while len(record_lines(ws, run_id)) < count:
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.05)


def final(ws, run_id):
    return json.loads((ws.root / "runs" / run_id / "final_scores.json").read_text())


def test_sigterm_stops_launched_servers_writes_what_it_has_and_prints_the_resume_command(ws):
    text_dataset(ws)
    port = free_port()
    config = launched_config(ws, port)
    proc = start(config, "term")
    wait_for_records(ws, "term", proc, 2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Resume with: " in err and " -m lalmeval run --config " in err and "--resume term" in err
    assert port_is_free(port), "the launched server outlived the run"
    data = final(ws, "term")
    assert data["interrupted"] is True
    score = data["scores"][0]
    assert score["num_samples"] == COUNT and score["details"]["failures"].get("interrupted", 0) >= 1
    assert "PARTIAL" in out


def wait_for_log(ws, run_id, proc, text, limit=60):
    log = ws.root / "runs" / run_id / "launch_m.log"
    deadline = time.time() + limit
    while not (log.exists() and text in log.read_text()):
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.05)


def test_ctrl_c_while_starting_stops_the_launched_server_and_says_how_to_run_again(ws):
    text_dataset(ws)
    port = free_port()
    config = launched_config(ws, port)
    proc = start(config, "early")
    wait_for_log(ws, "early", proc, "serving")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert ("Run again with: " in err or "Resume with: " in err) and " -m lalmeval run --config " in err
    time.sleep(0.5)
    assert port_is_free(port)


def test_second_ctrl_c_exits_at_once_and_still_stops_launched_servers(ws):
    text_dataset(ws)
    port = free_port()
    config = launched_config(ws, port, delay=2.0)
    proc = start(config, "twice")
    wait_for_log(ws, "twice", proc, "request")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted again" in err
    time.sleep(0.5)
    assert port_is_free(port), "the second Ctrl-C left the launched server running"


def test_a_launched_server_writing_carriage_returns_without_newlines_never_stalls(ws):
    text_dataset(ws, count=4)
    port = free_port()
    config = launched_config(ws, port, delay=0.01, progress_bytes=400_000)  # far beyond any pipe buffer
    proc = start(config, "bars")
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    log = (ws.root / "runs" / "bars" / "launch_m.log").read_text()
    assert "loading weights" in log and len(log) >= 400_000


@pytest.mark.slow
def test_a_second_run_on_a_run_directory_in_use_exits_2_and_the_first_finishes_whole(ws):
    # Long enough (30 rounds of 0.3 s) that the first run is still going when the second has started,
    # however slowly a loaded machine starts a Python process.
    text_dataset(ws, count=60)
    port = free_port()
    config = launched_config(ws, port, delay=0.3)
    first = start(config, "busy")
    wait_for_records(ws, "busy", first, 1)
    second = start(config, "busy")
    _, err2 = second.communicate(timeout=60)
    assert second.returncode == 2, err2
    assert "this run directory is in use by another run (pid" in err2 and "choose another --run-id" in err2
    _, err1 = first.communicate(timeout=120)
    assert first.returncode == 0, err1
    ids = [r["id"] for r in record_lines(ws, "busy")]
    assert sorted(ids) == sorted(f"q{i}" for i in range(60))


def limit_file_size(max_bytes):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return apply


def test_a_full_disk_stops_the_run_cleanly_and_resume_after_freeing_space_completes_it(ws):
    text_dataset(ws, count=30)
    port = free_port()
    config = launched_config(ws, port, delay=0.02, batch_size=1)
    proc = start(config, "full", preexec_fn=limit_file_size(6000))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    assert "File too large" in err and "then resume with: " in err and " -m lalmeval run --config " in err
    assert "Traceback" not in err
    kept = record_lines(ws, "full")
    assert 0 < len(kept) < 30 and all(r["error"] is None for r in kept)

    again = start(config, "full")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    score = final(ws, "full")["scores"][0]
    assert (score["num_samples"], score["num_failed"], score["score"]) == (30, 0, 100.0)
    assert f"Reused {len(kept)} stored prediction(s)" in err


@pytest.mark.parametrize("run_id", ["../../x", "a/b", ".hidden", ""])
def test_run_ids_are_plain_names(ws, run_id):
    text_dataset(ws, count=1)
    config = ws.config([model("http://127.0.0.1:9/v1")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    out = subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", run_id],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [f"error: --run-id / --resume must be a plain name (letters, digits, '.', '_', '-'; at most 128), got {run_id!r}"]
    assert not (ws.root / "x").exists()


def answer_echo(seen, n):
    return f"echo: {seen.text.split()[-1]}"


def run_cli(ws, run_id, **kwargs):
    return subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(ws.root / "config.yaml"), "--run-id", run_id],
                          cwd=REPO, capture_output=True, text=True, timeout=180, **kwargs)


@pytest.mark.parametrize("limit, refused", [(200, "config.yaml"), (20, ".lock")])
def test_a_full_disk_when_the_run_writes_its_config_is_exit_4_not_an_internal_error(ws, limit, refused):
    """The disk refuses the run's first real write: config.yaml (the write check's empty probe file and
    the lock line still fit), or the lock's holder line. Both used to leave WriteFailed / OSError to
    main(), which printed `internal error: …` and exited 1, the code of a bug."""
    text_dataset(ws, count=2)
    with ScriptedEndpoint(answer_echo) as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "full", preexec_fn=limit_file_size(limit))
    assert out.returncode == 4, out.stderr
    [line] = out.stderr.strip().splitlines()
    assert f"full/{refused}: File too large. Free space (or fix the folder), then run again with: " in line and "--run-id full" in line
    assert not list((ws.root / "runs" / "full").glob("*.tmp")) and not ep.requests


def test_a_scores_file_that_cannot_be_opened_stops_the_run_with_exit_4(ws):
    """scores/<dataset>__<metric>__<model>.jsonl cannot be created (its name is a link into a folder that
    does not exist, which no check at start can refuse). The Engine used to score in memory without a
    word, so the run exited 0 with the per-sample scores missing."""
    text_dataset(ws, count=4)
    (ws.root / "runs" / "s" / "scores").mkdir(parents=True)
    (ws.root / "runs" / "s" / "scores" / "qs__accuracy__m.jsonl").symlink_to(ws.root / "gone" / "scores.jsonl")
    with ScriptedEndpoint(answer_echo) as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = run_cli(ws, "s")
    assert out.returncode == 4, out.stderr
    assert "cannot write " in out.stderr and "qs__accuracy__m.jsonl: No such file or directory" in out.stderr and "then resume with: " in out.stderr
    assert "Traceback" not in out.stderr


def test_a_launch_log_that_cannot_be_written_does_not_stall_the_server(ws):
    """launch_<model>.log cannot be opened (a folder holds its name): the server's output is still drained
    (it used to stop being read, so a chatty server blocked on its pipe), and the run says so."""
    text_dataset(ws, count=4)
    port = free_port()
    config = launched_config(ws, port, delay=0.01, progress_bytes=400_000)  # far beyond any pipe buffer
    (ws.root / "runs" / "nolog").mkdir(parents=True)
    (ws.root / "runs" / "nolog" / "launch_m.log").symlink_to(ws.root / "gone" / "launch.log")  # cannot be opened
    proc = start(config, "nolog")
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert "launch_m.log: No such file or directory; the server's output is not kept" in err
    assert final(ws, "nolog")["scores"][0]["num_samples"] == 4


def test_a_refused_or_interrupted_write_keeps_the_old_file_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "final_scores.json"
    target.write_text("old")
    def disk_full(self, *args, **kwargs):  # what the disk answers; the scratch file is already created
        Path.touch(self)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patched:
        patched.setattr(Path, "write_text", disk_full)
        with pytest.raises(WriteFailed, match=r"cannot write .*final_scores\.json: No space left on device"):
            write_atomic(target, "new")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["final_scores.json"]

    def ctrl_c(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, "new")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["final_scores.json"]


# --- A launched server's children: stopped when they can be traced, never waited for -------------


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting to be reaped does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False


def wait_for_pid(path: Path, limit: float = 10.0) -> int:
    deadline = time.time() + limit
    while not (path.exists() and path.read_text().strip()):
        assert time.time() < deadline, f"{path} was never written"
        time.sleep(0.05)
    return int(path.read_text())


def escaping_config(ws, port, pidfile, detached):
    """A launch command whose server first starts a `sleep` in a session (and process group) of its own that
    inherits the server's stdout; `detached` double-forks it, so nothing links it to the server any more."""
    child = f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300'"
    server = f"exec {sys.executable} {REPO / 'tests' / 'support' / 'slow_server.py'} --port {port} --delay 0.01"
    launch = f"({child} &); {server}" if detached else f"{child} & {server}"
    entry = model(f"http://127.0.0.1:{port}/v1", launch=launch, launch_timeout=60)
    return ws.config([entry], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))


def test_a_child_the_server_started_in_a_session_of_its_own_is_stopped_with_it(ws):
    """The child left the server's process group (setsid) and holds its stdout pipe: the run used to wait
    for that pipe's end for ever. It is the server's descendant, so it is stopped too."""
    text_dataset(ws, count=2)
    port, pidfile = free_port(), ws.root / "child.pid"
    config = escaping_config(ws, port, pidfile, detached=False)
    proc = start(config, "kids")
    try:
        _, err = proc.communicate(timeout=90)
        child = wait_for_pid(pidfile)
        assert proc.returncode == 0, err
        assert port_is_free(port)
        deadline = time.time() + 10
        while running(child) and time.time() < deadline:
            time.sleep(0.05)
        assert not running(child), "the server's child outlived the run"
    finally:
        proc.kill()
        if pidfile.exists() and running(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_a_detached_child_holding_the_servers_output_open_does_not_keep_the_run_from_exiting(ws):
    """A double fork leaves no trace from the server to its child, which keeps the stdout pipe open after the
    server's group is stopped: the run closes its end of the pipe instead of waiting for its end."""
    text_dataset(ws, count=2)
    port, pidfile = free_port(), ws.root / "child.pid"
    config = escaping_config(ws, port, pidfile, detached=True)
    proc = start(config, "detached")
    try:
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        assert port_is_free(port)
        assert running(wait_for_pid(pidfile)), "the detached child should still hold the pipe (else this test shows nothing)"
        assert final(ws, "detached")["scores"][0]["score"] == 100.0
    finally:
        proc.kill()
        if pidfile.exists() and running(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
