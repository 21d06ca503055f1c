"""`lalmeval check --config`: one real, tiny request per endpoint (each replica, the judge) of the model's
own kind, a line per endpoint — OK with latency and the reply's first words, or FAIL with the reason and
the likely fix — exit 0 only when all answer; launched servers are started, checked and stopped."""

import socket
import sys

from lalmeval.cli.commands import main
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.workspace import REPO, demo_rows, model


def speech(ws):
    rows = ws.copy_demo_audio(demo_rows(2))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})


def check(ws, capsys):
    code = main(["check", "--config", str(ws.root / "config.yaml")])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_every_replica_transcription_endpoint_and_judge_answers_one_request_of_its_kind(ws, capsys):
    speech(ws)
    with ScriptedEndpoint(lambda seen, n: "Hello there, I heard a short command") as one, ScriptedEndpoint(lambda seen, n: "hi") as two, \
            ScriptedEndpoint(lambda seen, n: "turn on the lights") as asr, ScriptedEndpoint(lambda seen, n: "OK") as judge:
        ws.config([model([one.url, two.url], "chat"), model(asr.url, "asr", inference_type="transcription")], [["cmds", "word_error_rate"]],
                  judge_properties={"judge_model": "j", "judge_api_endpoint": judge.url})
        code, lines, err = check(ws, capsys)
        sent = [len(e.requests) for e in (one, two, asr, judge)]
        chat, transcription, judged = one.requests[0], asr.requests[0], judge.requests[0]
    assert code == 0 and sent == [1, 1, 1, 1], (sent, err)
    assert chat.audio_seconds and chat.body["max_tokens"] == 32 and chat.body["model"] == "scripted-chat"   # audio, as the datasets send
    assert transcription.path == "/v1/audio/transcriptions" and transcription.audio_seconds
    assert not judged.audio_seconds and "OK" in judged.text
    assert [line.split()[0] for line in lines] == ["OK"] * 4
    assert lines[0].startswith(f"OK    chat ({one.url})  {one.url}  ") and lines[0].endswith(' s  "Hello there, I heard a short command"')
    assert lines[2].startswith(f"OK    asr  {asr.url}") and lines[3].startswith(f"OK    judge j  {judge.url}")
    assert not list(ws.root.rglob(".check"))   # nothing launched, no log kept: no folder left behind


def test_a_failing_endpoint_is_one_line_with_its_reason_and_likely_fix_and_exit_2(ws, capsys):
    ws.text_questions(2)
    refuse = lambda seen, n: Reply(status=401, payload={"error": {"message": "Incorrect API key provided"}})
    with ScriptedEndpoint(lambda seen, n: "hi") as good, ScriptedEndpoint(refuse) as locked:
        no_v1 = good.url.removesuffix("/v1")
        ws.config([model(good.url, "good"), model(locked.url, "locked", auth_token="sk-wrong-0123456789"), model(no_v1, "no-v1")],
                  [["qs", "accuracy"]])
        code, lines, err = check(ws, capsys)
        text_only = not good.requests[0].audio_seconds
    assert code == 2 and text_only and "error: 2 of 3 endpoint(s) did not answer" in err
    assert lines[0].startswith("OK    good")
    assert lines[1].startswith(f"FAIL  locked  {locked.url}  HTTP 401: Incorrect API key provided (POST {locked.url}/chat/completions) — check auth_token")
    assert lines[2].startswith(f"FAIL  no-v1  {no_v1}  HTTP 404") and "the url probably misses /v1" in lines[2]
    assert "sk-wrong-0123456789" not in "\n".join(lines) + err


def test_a_server_that_is_not_there_says_to_start_it(ws, capsys):
    ws.text_questions(2)
    ws.config([model("http://127.0.0.1:9/v1", "gone")], [["qs", "accuracy"]])
    code, lines, _ = check(ws, capsys)
    assert code == 2 and lines[0].startswith("FAIL  gone  http://127.0.0.1:9/v1  connection error") and "is a server listening there?" in lines[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_launched_model_is_started_checked_and_stopped(ws, capsys):
    ws.text_questions(2)
    port = free_port()
    launch = f"{sys.executable} {REPO / 'tests' / 'support' / 'slow_server.py'} --port {port} --delay 0.05"
    ws.config([model(f"http://127.0.0.1:{port}/v1", launch=launch, launch_timeout=60)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    code, lines, err = check(ws, capsys)
    assert code == 0, err
    assert lines == [line for line in lines if line.startswith(f"OK    m  http://127.0.0.1:{port}/v1")] and len(lines) == 1
    assert "echo:" in lines[0]
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0   # stopped again
    assert (ws.root / "runs" / ".check" / "launch_m.log").is_file()


def test_a_launch_that_fails_is_the_line_of_its_model_and_the_others_are_still_checked(ws, capsys):
    ws.text_questions(2)
    port = free_port()
    with ScriptedEndpoint(lambda seen, n: "hi") as good:
        ws.config([model(f"http://127.0.0.1:{port}/v1", "broken", launch="echo 'error: no such weights' >&2; exit 3", launch_timeout=30),
                   model(good.url, "good")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code, lines, err = check(ws, capsys)
    assert code == 2 and "error: 1 of 2 endpoint(s) did not answer" in err and len(lines) == 2
    assert lines[0].startswith(f"FAIL  broken  http://127.0.0.1:{port}/v1  model 'broken': launch command exited with code 3")
    assert "error: no such weights" in lines[0] and lines[1].startswith("OK    good")
