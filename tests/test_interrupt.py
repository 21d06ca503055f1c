"""Crashes and Ctrl-C: nothing finished is lost, resumed runs score like uninterrupted ones."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import lalmeval.reports as reports
import lalmeval.run.runner as runner
from lalmeval.cli.commands import main
from lalmeval.config.options import RunOptions
from lalmeval.inference.launch import Launcher
from lalmeval.results.store import RunStore
from lalmeval.run.runner import run
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


def start(config, run_id, cache=False, resume=False):
    args = ["--resume" if resume else "--run-id", run_id, *([] if cache else ["--no-cache"])]
    return subprocess.Popen([sys.executable, "-m", "lalmeval", "run", "--config", str(config), *args],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(ep, count, proc, limit=60):
    deadline = time.time() + limit
    while len(ep.requests) < count:
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.01)


def interrupt_after(ep, count, proc, timeout=90):
    """SIGINT once `ep` has seen `count` requests; (requests seen when it was sent, stderr) once the run ends."""
    wait_for(ep, count, proc)
    at_signal = len(ep.requests)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=timeout)
    return at_signal, err


def stored_lines(run_dir, run_id):
    path = run_dir / run_id / "records" / "cmds__m.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def scores(run_dir, run_id):
    final = json.loads((run_dir / run_id / "final_scores.json").read_text())
    return [(s["score"], s["num_samples"], s["num_failed"], s["details"]["corpus_wer"]) for s in final["scores"]]


@pytest.mark.parametrize("kill_after", [1, 9, 20])
@pytest.mark.slow
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


@pytest.mark.slow
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
        assert " --no-cache --resume int" in err  # the run's own way: its cache stays off when pasted
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


@pytest.mark.slow
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


# --- judges and queued requests stop too ------------------------------------------------------

JUDGED = 30


def judged_run(ws, ep, judge_ep, metric, concurrency=1):
    """JUDGED text questions whose answers are judged one at a time: by llm_judge_binary, or by the
    judge fallback of `answer_extraction: llm` (the model's replies name no option)."""
    if metric == "llm_judge_binary":
        rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(JUDGED)]
        spec = {"textual_input_column": "question", "target_column": "reference"}
    else:
        rows = [{"id": f"q{i}", "question": f"question {i}", "options": ["cat", "dog"], "answer": "B"} for i in range(JUDGED)]
        spec = {"textual_input_column": "question", "choices_column": "options", "target_column": "answer", "answer_extraction": "llm"}
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "audio_column": None, **spec}})
    return ws.config([model(ep.url)], [["qs", metric]], output_dir=str(ws.root / "runs"),
                     judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url, "judge_concurrency": concurrency})


@pytest.mark.parametrize("metric,verdict", [("llm_judge_binary", "Rating: 1"), ("accuracy", "Answer: B")])
@pytest.mark.slow
def test_ctrl_c_stops_judge_requests_too(ws, metric, verdict):
    """Inference is quick; a slow judge (one judgment at a time) is grading 30 answers when the run
    gets SIGINT. No judge request starts after it; the unjudged samples are failed with an
    'interrupted' reason, the run exits 130, and resuming it judges only what is missing."""
    with ScriptedEndpoint(lambda seen, n: "It is hard to say.") as ep, ScriptedEndpoint(lambda seen, n: verdict, latency=0.3) as judge_ep:
        config = judged_run(ws, ep, judge_ep, metric)
        proc = start(config, "j", cache=True)
        wait_for(ep, JUDGED, proc)  # every answer asked for (and none interrupted)
        at_signal, err = interrupt_after(judge_ep, 3, proc)
        judged = len(judge_ep.requests)
        assert proc.returncode == 130, err
        # The one in flight may finish, and one may have started as the signal was on its way.
        assert judged <= at_signal + 2, f"{judged - at_signal} judge requests after Ctrl-C (of {JUDGED})"
        final = json.loads((ws.root / "runs" / "j" / "final_scores.json").read_text())
        score = final["scores"][0]
        lines = [json.loads(x) for x in (ws.root / "runs" / "j" / "scores" / f"qs__{metric}__m.jsonl").read_text().splitlines()]
        unjudged = [x for x in lines if x.get("judge_failed")]
        assert final["interrupted"] and len(lines) == JUDGED and score["num_failed"] == len(unjudged) >= JUDGED - judged
        assert all(x["judge_failed"].startswith("interrupted: ") for x in unjudged), unjudged[0]

        judge_config = judged_run(ws, ep, judge_ep, metric, concurrency=8)  # only how fast the judge is asked changes
        resumed = start(judge_config, "j", cache=True, resume=True)
        _, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, err
        assert len(judge_ep.requests) - judged == len(unjudged)  # the judgments made before Ctrl-C come from the cache
    assert json.loads((ws.root / "runs" / "j" / "final_scores.json").read_text())["scores"][0]["score"] == 100.0


@pytest.mark.slow
def test_ctrl_c_abandons_a_judge_request_still_in_flight_after_the_grace_period(ws):
    """A judge that takes minutes per reply: the run does not wait for it beyond the grace period."""
    with ScriptedEndpoint(lambda seen, n: "It is hard to say.") as ep, \
            ScriptedEndpoint(lambda seen, n: Reply(payload=chat_payload("Rating: 1"), delay=300)) as judge_ep:
        config = judged_run(ws, ep, judge_ep, "llm_judge_binary")
        config.write_text(config.read_text().replace("judge_concurrency: 1", "judge_concurrency: 1\n  judge_timeout: 600"))
        proc = start(config, "slow", cache=True)
        wait_for(ep, JUDGED, proc)
        wait_for(judge_ep, 1, proc)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("the run waited for the judge's reply after the grace period")
    assert proc.returncode == 130, err
    lines = [json.loads(x) for x in (ws.root / "runs" / "slow" / "scores" / "qs__llm_judge_binary__m.jsonl").read_text().splitlines()]
    assert len(lines) == JUDGED and all(x["judge_failed"].startswith("interrupted: ") for x in lines)


def test_first_ctrl_c_sends_no_request_that_was_waiting_for_its_turn(ws):
    """batch_size 1: one request in flight, a few workers waiting for the endpoint's slot with their
    samples ready. After Ctrl-C the one in flight finishes; the waiting ones are not sent."""
    run_dir = ws.root / "runs"
    with ScriptedEndpoint(lambda seen, n: Reply(payload=chat_payload("turn on the light"), delay=0.3)) as ep:
        config = setup(ws, ep, run_dir)
        config.write_text(config.read_text().replace(f"batch_size: {BATCH}", "batch_size: 1"))
        proc = start(config, "queued")
        at_signal, err = interrupt_after(ep, 3, proc)
        sent = len(ep.requests)
    assert proc.returncode == 130 and "--resume queued" in err, err
    assert sent <= at_signal + 1, f"{sent - at_signal} requests sent after Ctrl-C"
    assert len(stored_lines(run_dir, "queued")) == sent  # what was sent is kept; what was not is not written


def answer(seen, n):
    return f"answer {seen.text.split()[-1]}"


def large_dataset(ws):
    """A million rows: opening them (a scan in a worker thread) takes seconds."""
    (ws.root / "data").mkdir()
    with (ws.root / "data" / "set.jsonl").open("w") as handle:
        for i in range(1_000_000):
            handle.write(f'{{"id": "q{i}", "question": "question {i}", "reference": "answer {i}"}}\n')
    ws.runspec("qa", "questions", {"qs": {"hf_repo": "data/set.jsonl", "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"), filters={"num_samples": 5})


def ctrl_c_while_opening(ws, presses):
    """Start a run on the large dataset, press Ctrl-C `presses` times (0.3 s apart) while it scans the
    rows; the exit code, stderr and the seconds it took to end after the last press."""
    large_dataset(ws)
    proc = subprocess.Popen([sys.executable, "-m", "lalmeval", "run", "--config", str(ws.root / "config.yaml"), "--run-id", "o"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (ws.root / "runs" / "o" / "config.yaml").exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.02)
    time.sleep(0.5)  # scanning the rows now
    for press in range(presses):
        time.sleep(0.3 if press else 0)
        proc.send_signal(signal.SIGINT)
    last = time.time()
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, err, time.time() - last


@pytest.mark.slow
def test_a_second_ctrl_c_while_the_data_is_opened_exits_at_once_without_a_traceback(ws):
    """Ctrl-C twice while a large dataset is being opened: the run's handlers are in place from the
    first step, so the second Ctrl-C ends the process at once (it used to wait for the scan, then print
    `RuntimeError: Event loop is closed` tracebacks from the executor's shutdown)."""
    code, err, took = ctrl_c_while_opening(ws, presses=2)
    assert code == 130
    assert "Traceback" not in err and took < 2, f"{took:.1f}s after the second Ctrl-C; stderr:\n{err[-600:]}"


@pytest.mark.slow
def test_ctrl_c_while_the_data_is_opened_ends_the_run_without_waiting_for_the_scan(ws):
    """One Ctrl-C while the rows are scanned: nothing was requested, so there is nothing to wait for."""
    code, err, took = ctrl_c_while_opening(ws, presses=1)
    assert code == 130 and "Traceback" not in err, err[-600:]
    assert took < 2, f"the run went on for {took:.1f}s after Ctrl-C, scanning data it would not use"
    assert "interrupted while opening the data: nothing was requested. Run again with: " in err and "--run-id o" in err, err

def test_after_ctrl_c_the_run_ends_with_its_last_request_in_flight_not_at_the_end_of_the_grace_period(ws):
    """Ctrl-C with a long read-ahead still queued: once the requests in flight are answered nothing is
    left to wait for (the read-ahead used to hold the pass open until the grace period ran out)."""
    ws.text_questions(60)
    signalled = []

    def handler(seen, n):
        if n == 6:
            signalled.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
        return Reply(payload=chat_payload(answer(seen, n)), delay=0.3)

    grace = 120.0
    previous = signal.getsignal(signal.SIGINT)
    try:
        with ScriptedEndpoint(handler) as ep:
            ws.config([model(ep.url, batch_size=2)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
            result = run(ws.plan(), ws.root / "runs", "g", quiet=True, options=RunOptions(use_cache=False, grace=grace))
            ended = time.monotonic()
            sent = len(ep.requests)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.interrupted and sent < 60
    assert len(ws.records("qs", "m", "g")) == sent  # every request in flight was let finish and written
    assert ended - signalled[0] < grace / 4, f"the run ended {ended - signalled[0]:.0f}s after Ctrl-C, with nothing in flight"


def ctrl_c(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(1)


async def ctrl_c_while_servers_stop(self, grace=10.0):
    os.kill(os.getpid(), signal.SIGINT)
    await asyncio.sleep(0.5)
    await ORIGINAL_STOP(self, grace)


ORIGINAL_STOP = Launcher.stop


# Where Ctrl-C lands (what it replaces), what the run then says, and the files it says are on disk.
STAGES = [
    ((RunStore, "write_config", ctrl_c), "while starting: nothing was requested. Run again with: ", []),
    ((Launcher, "stop", ctrl_c_while_servers_stop), "before final_scores.json was written: the records are on disk. Resume with: ",
     ["records/qs__m.jsonl"]),
    ((RunStore, "write_final", ctrl_c), "before final_scores.json was written: the records are on disk. Resume with: ",
     ["records/qs__m.jsonl"]),
    ((runner, "_print_summary", ctrl_c), "after the run was written: the records, final_scores.json and the reports are on disk. Resume with: ",
     ["records/qs__m.jsonl", "final_scores.json", "report.html", "results.csv", "results.md"]),
]


def interrupted_run(ws, monkeypatch, capsys, where):
    """Three questions run in-process with Ctrl-C sent from `where` (what monkeypatch.setattr replaces): exit code, stderr."""
    ws.text_questions(3)
    monkeypatch.setattr(*where)
    previous = signal.getsignal(signal.SIGTERM)
    # Ctrl-C as a terminal sends it, whatever this process inherited: started in the background of a
    # shell without job control, Python begins with SIGINT ignored and no KeyboardInterrupt would come.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with ScriptedEndpoint(answer) as ep:
            ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
            code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, inherited)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("where, said, on_disk", STAGES, ids=["config", "servers", "final", "summary"])
def test_ctrl_c_at_any_stage_says_what_is_on_disk_and_how_to_go_on(ws, monkeypatch, capsys, where, said, on_disk):
    """Ctrl-C outside inference (the run's own handlers are not in place then, or every sample is done):
    the message used to say `interrupted while starting (no sample finished)` whatever was written.
    (While the reports are written: the test below.)"""
    code, err = interrupted_run(ws, monkeypatch, capsys, where)
    run_dir = ws.root / "runs" / "t"
    assert code == 130 and "no sample finished" not in err, err[-600:]
    assert f"interrupted {said}" in err and ("--resume t" if "Resume" in said else "--run-id t") in err, err[-600:]
    written = [str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file() and p.parent.name != "scores"]
    assert sorted(set(written) - {".lock", "config.yaml"}) == sorted(on_disk)  # and no temporary file
    if "final_scores.json" in on_disk:
        assert json.loads((run_dir / "final_scores.json").read_text())["scores"][0]["num_samples"] == 3
    if on_disk:
        assert len(ws.records("qs", "m")) == 3


def test_ctrl_c_while_reports_are_written_does_not_claim_nothing_finished(ws, monkeypatch, capsys):
    """Ctrl-C after every sample is inferred and scored, while report.html is written (the run's signal
    handlers are removed then): the run used to print `interrupted while starting (no sample finished)`
    although every record and final_scores.json were on disk."""
    code, err = interrupted_run(ws, monkeypatch, capsys, (reports, "write_reports", ctrl_c))
    final = json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())
    assert code == 130 and final["scores"][0]["num_samples"] == 3
    assert "no sample finished" not in err, err[-300:]
    assert "interrupted while writing the reports: the records and final_scores.json are on disk. Resume with: " in err
    assert not list((ws.root / "runs" / "t").glob("*.tmp"))
