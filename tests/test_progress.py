"""The live progress display: the whole run, shared-server forecasts, 80 columns, plain lines, not run ≠ failed."""

import asyncio
import io
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from fcntl import ioctl

import pytest
from rich.console import Console

from lalmeval.config.schema import ModelInfo
from lalmeval.inference.client import Endpoint
from lalmeval.inference.job import RecordStream
from lalmeval.results.ledger import INTERRUPTED
from lalmeval.results.records import Record
from lalmeval.run.progress import PassView, Progress
from lalmeval.run.throughput import RateMeter, finish_times, shared_groups
from tests.support.browser import parse
from tests.support.endpoint import ScriptedEndpoint, answer_by_number
from tests.support.workspace import REPO, model

T0 = 1000.0


class Pass:
    """The parts of an inference pass progress reads: a real record stream, real endpoints."""

    def __init__(self, dataset, name, endpoints, total):
        self.dataset, self.name, self.endpoints, self.total = dataset, name, endpoints, total
        self.stream, self.reused = RecordStream(), 0

    def publish(self, count, error=None):
        for _ in range(count):
            self.stream.push(Record(id=str(self.stream.count), prompt="", system=None, params={}, reference=None, error=error))


def endpoint(name, url, stop=None):
    return Endpoint(ModelInfo(name=name, url=url, model=name, batch_size=8), stop=stop)


def progress(passes, endpoints, stream=None):
    views = [PassView(f"{p.dataset} × {p.name}", p) for p in passes]
    shown = {}
    for e in endpoints:
        shown.setdefault(e.info.name, []).append(e)
    board = Progress(views, shown, interval=60, stream=stream or io.StringIO())
    board.started = T0
    return board


def at_width_80(board, now, height=24):
    out = io.StringIO()
    Console(file=out, width=80, height=height, color_system=None, force_terminal=True).print(board.renderable(80, height, now=now))
    return out.getvalue().splitlines()


def test_passes_sharing_a_server_are_forecast_together_not_each_alone():
    # One server doing 10/s, shared evenly by a pass with 100 left and one with 300 left: the first ends
    # at 20 s, then the second gets the whole server and ends at 40 s (alone at 5/s it would say 60 s).
    assert finish_times([100, 300], [5, 5]) == [20, 40]
    # A pass that has not begun gets the mean share; one of unknown size never ends, the others still do.
    assert finish_times([100, 100, 0], [10, 0, 0]) == [20, 20, 0]
    first, unknown = finish_times([50, float("inf")], [5, 5])
    assert first == 10 and unknown is None
    assert finish_times([10], [0]) == [None]


def test_passes_are_grouped_by_the_servers_they_share():
    assert shared_groups([["a"], ["b"], ["a", "c"], ["c"], ["d"]]) == [0, 1, 0, 0, 2]


def test_rate_is_measured_over_the_recent_window():
    meter = RateMeter(window=60)
    for t, n in [(0, 0), (30, 0), (60, 0), (90, 300), (120, 600)]:   # a slow start (a server warming up), then 10/s
        meter.observe(t, n)
    assert meter.rate() == pytest.approx(10.0)   # the last minute's pace, not the average since the start (5/s)


def two_datasets_on_one_server(stop=None):
    server = endpoint("qwen2-audio-7b-instruct", "http://127.0.0.1:8000/v1", stop)
    short = Pass("librispeech_test_clean", "qwen2-audio-7b-instruct", [server], 200)
    long = Pass("common_voice_17_english_test_with_a_long_name", "qwen2-audio-7b-instruct", [server], 400)
    board = progress([short, long], [server])
    board.state(T0)
    short.publish(50)
    long.publish(48, error="HTTP 500: boom")
    long.publish(2)
    return board, short, long


def test_the_run_line_shows_done_total_failures_rate_elapsed_and_a_shared_eta():
    board, short, long = two_datasets_on_one_server()
    state = board.state(T0 + 10)
    # 100 done in 10 s: the server does 10/s; 150 + 350 left = 50 s, whatever each pass's own pace.
    assert (state.done, state.total, state.failed, state.rate) == (100, 600, 48, 10.0)
    assert state.eta == pytest.approx(50)
    assert [p.eta for p in state.passes] == [pytest.approx(30), pytest.approx(50)]
    lines = at_width_80(board, T0 + 10)
    assert lines[0] == "100/600 done (16%), 48 failed"
    assert lines[1].endswith("10.0/s  ETA 50s  elapsed 10s")


def test_the_live_display_fits_80_columns_and_the_terminal_height():
    server = endpoint("a-model-with-a-rather-long-name", "http://gateway.example.internal:8443/openai/deployments/x")
    passes = [Pass(f"a_dataset_with_a_long_descriptive_name_{i:02d}", server.info.name, [server], 1000) for i in range(40)]
    board = progress(passes, [server])
    board.state(T0)
    for item in passes:
        item.publish(10)
    lines = at_width_80(board, T0 + 5, height=24)
    assert len(lines) <= 23 and all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert "..." not in "\n".join(lines)
    assert lines[0].startswith("400/40,000 done") and "ETA" in lines[1]
    assert any(line.startswith("… ") and "more passes" in line for line in lines)   # the rest, counted
    assert any(line.startswith("a_dataset_w…") and line.split()[0].endswith("name_00") for line in lines)   # cut in the middle
    assert lines[-1].startswith("a-model-with…") and "eployments/x" in lines[-1] and lines[-1].endswith("0/8        0")


def test_samples_a_stopped_run_never_requested_are_not_run_not_failed():
    stop = asyncio.Event()
    board, short, long = two_datasets_on_one_server(stop)
    stop.set()   # Ctrl-C: what was not requested is settled as not run
    short.publish(150, error=INTERRUPTED)
    short.stream.close()
    state = board.state(T0 + 20)
    assert (state.failed, state.not_run) == (48, 150)
    assert state.eta is None
    lines = at_width_80(board, T0 + 20)
    assert lines[0] == "100/600 done (16%), 48 failed, 150 not run"
    assert "stopping" in lines[1] and "ETA" not in lines[1]


def test_plain_lines_when_the_output_is_not_a_terminal():
    board, short, long = two_datasets_on_one_server()
    out = io.StringIO()
    board.stream = out
    board._plain(now=T0 + 10)
    short.publish(150)
    short.stream.close()
    board._plain(now=T0 + 20)
    board._plain(now=T0 + 30)
    blocks = [block.splitlines() for block in re.split(r"\n(?=\[)", out.getvalue().strip())]
    assert blocks[0] == [
        "[    10s] 100/600 done (16%), 48 failed, 10.0/s, ETA 50s, elapsed 10s",
        "  librispeech_test_clean × qwen2-audio-7b-instruct: 50/200, 5.0/s, ETA 30s",
        "  common_voice_17_english_test_with_a_long_name × qwen2-audio-7b-instruct: 50/400, 48 failed, 5.0/s, ETA 50s",
        "  qwen2-audio-7b-instruct http://127.0.0.1:8000/v1: 0 in flight (limit 8/8), 0 retries"]
    assert blocks[1][1] == "  librispeech_test_clean × qwen2-audio-7b-instruct: 200/200 — done"
    assert len(blocks[2]) == 3   # a finished pass is said once


def read_terminal(fd, proc, limit=120):
    out = b""
    deadline = time.time() + limit
    while time.time() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other end closed: the run has ended
            break
        if not chunk:
            break
        out += chunk
    proc.wait(30)
    return out.decode("utf-8", "replace")


def test_a_real_run_on_an_80_column_terminal_draws_no_line_wider(ws):
    """The CLI in a pseudo-terminal 80 columns wide: every line it draws, control codes aside, fits."""
    names = [f"a_dataset_with_a_rather_long_name_number_{i}" for i in range(3)]
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(30)]
    ws.runspec("qa", "questions", {name: {"hf_repo": ws.jsonl(rows, f"data/{name}.jsonl"), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None} for name in names})
    with ScriptedEndpoint(answer_by_number, latency=0.05) as ep:
        entry = model(ep.url, name="a-model-name-that-takes-room", batch_size=2)
        config = ws.config([entry], [[n, "accuracy"] for n in names], output_dir=str(ws.root / "runs"))
        main_fd, child_fd = pty.openpty()
        ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        env = {**os.environ, "COLUMNS": "80", "LINES": "24", "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        proc = subprocess.Popen([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "tty"],
                                cwd=REPO, stdin=child_fd, stdout=child_fd, stderr=child_fd, env=env, start_new_session=True)
        os.close(child_fd)
        try:
            text = read_terminal(main_fd, proc)
        finally:
            os.close(main_fd)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, text
    # A redraw moves the cursor up and erases lines: those codes start a line; colours and the like are dropped.
    lines = re.sub(r"\x1b\[\d*[AK]|\r", "\n", text).split("\n")
    visible = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", line) for line in lines]
    drawn = [line for line in visible if not line.startswith(("Results: ", "Report: "))]   # paths are as long as they are
    assert all(len(line) <= 80 for line in drawn), max(drawn, key=len)
    assert any(line.startswith("90/90 done (100%)") for line in visible), text
    assert "..." not in text
    final = json.loads((ws.root / "runs" / "tty" / "final_scores.json").read_text())
    assert [s["num_samples"] for s in final["scores"]] == [30, 30, 30]


def test_after_ctrl_c_the_samples_never_requested_show_as_not_run(ws):
    ws.text_questions(40)
    with ScriptedEndpoint(answer_by_number, latency=0.1) as ep:
        config = ws.config([model(ep.url, batch_size=2)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        proc = subprocess.Popen([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "c"],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while len(ep.requests) < 6:
            assert proc.poll() is None and time.time() < deadline, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    answered = sum(1 for r in ws.records("qs", "m", "c") if r["error"] is None)
    last = err.splitlines()[max(i for i, line in enumerate(err.splitlines()) if re.match(r"\[\s*\d+s\] ", line)):]
    assert re.match(rf"\[\s*\d+s\] {answered}/40 done \(\d+%\), {40 - answered} not run, stopping, elapsed", last[0]), err
    assert f"  qs × m: {answered}/40, {40 - answered} not run — done" in last
    assert "failed" not in last[0] and "Failed samples" not in out
    assert f"│ m     │ qs      │    {40 - answered} │" in out and "Not run: the run stopped before these samples were requested" in out
    failures = parse((ws.root / "runs" / "c" / "report.html").read_text()).by_id("failures").text
    assert f"{40 - answered} samples were not run" in failures and "No sample failed." in failures
