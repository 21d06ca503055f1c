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
