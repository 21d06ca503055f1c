"""Crashes and Ctrl-C: nothing finished is lost, resumed runs score like uninterrupted ones."""

import json
import signal
import subprocess
import sys
import time

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint, chat_payload
from tests.support.workspace import REPO, demo_rows, model

COUNT = 24
BATCH = 3


def by_clip(seen, n):
    return Reply(payload=chat_payload(f"turn on the light {round(seen.audio_seconds[0], 2)}"), delay=0.08)


def setup(ws, ep, run_dir):
    rows = ws.copy_demo_audio(demo_rows(COUNT))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    return ws.config([model(ep.url, batch_size=BATCH)], [["cmds", "word_error_rate"]], output_dir=str(run_dir))


def start(config, run_id):
    return subprocess.Popen([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", run_id, "--no-cache"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(ep, count, proc, limit=60):
    deadline = time.time() + limit
    while len(ep.requests) < count:
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.01)


def stored_lines(run_dir, run_id):
    path = run_dir / run_id / "records" / "cmds__m.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def scores(run_dir, run_id):
    final = json.loads((run_dir / run_id / "final_scores.json").read_text())
    return [(s["score"], s["num_samples"], s["num_failed"], s["details"]["corpus_wer"]) for s in final["scores"]]


@pytest.mark.parametrize("kill_after", [1, 9, 20])
def test_sigkill_then_resume_matches_an_uninterrupted_run(ws, kill_after):
    run_dir = ws.root / "runs"
    with ScriptedEndpoint(by_clip) as ep:
        config = setup(ws, ep, run_dir)
        assert start(config, "full").wait(120) == 0
        baseline, full_requests = scores(run_dir, "full"), len(ep.requests)
        assert full_requests == COUNT

        proc = start(config, "crash")
        wait_for(ep, full_requests + kill_after, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        before_resume = len(ep.requests) - full_requests
        lines = stored_lines(run_dir, "crash")  # every stored line parses: nothing torn
        finished = {r["id"] for r in lines if r["error"] is None}
        # Requests the server answered but whose replies were still on the wire are in flight too.
        assert len(finished) >= kill_after - 2 * BATCH

        resumed = start(config, "crash")
        assert resumed.wait(120) == 0, resumed.communicate()
        resumed_requests = len(ep.requests) - full_requests - before_resume
    assert scores(run_dir, "crash") == baseline
    assert resumed_requests == COUNT - len(finished)          # finished samples are never requested again
    assert before_resume - len(finished) <= 2 * BATCH        # at most the requests in flight were lost


def test_first_ctrl_c_finishes_in_flight_writes_and_says_how_to_resume(ws):
    run_dir = ws.root / "runs"
    with ScriptedEndpoint(by_clip) as ep:
        config = setup(ws, ep, run_dir)
        proc = start(config, "int")
        wait_for(ep, 6, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "Resume with: " in err and " -m lalmeval run --config " in err and "--resume int" in err
        final = json.loads((run_dir / "int" / "final_scores.json").read_text())
        assert final["interrupted"] is True
        interrupted_requests = len(ep.requests)
        assert interrupted_requests < COUNT
        assert len(stored_lines(run_dir, "int")) == interrupted_requests  # in-flight ones were let finish

        resumed = subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--resume", "int", "--no-cache"],
                                 cwd=REPO, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        assert len(ep.requests) == COUNT
    final = json.loads((run_dir / "int" / "final_scores.json").read_text())
    assert final["interrupted"] is False and final["scores"][0]["num_samples"] == COUNT


def test_second_ctrl_c_exits_at_once(ws):
    run_dir = ws.root / "runs"
    with ScriptedEndpoint(lambda s, n: Reply(payload=chat_payload("slow"), delay=30)) as ep:
        config = setup(ws, ep, run_dir)
        proc = start(config, "hang")
        wait_for(ep, BATCH, proc)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        started = time.time()
        proc.send_signal(signal.SIGINT)
        proc.wait(5)
        assert proc.returncode == 130 and time.time() - started < 3
        assert "interrupted again" in proc.stderr.read()
