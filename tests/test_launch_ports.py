"""`{port}` in a model's url and launch: free ports picked at run time; launch commands that find this
environment's `lalmeval` from any folder; a launch that fails leaves a run directory reports can read."""

import json
import os
import re
import socket
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from lalmeval.errors import UserError
from tests.support.workspace import REPO


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def lalmeval(*args, cwd, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def echo_entry(**settings):
    return {"name": "echo", "model": "echo-inputs", "url": "http://127.0.0.1:{port}/v1", "launch": "lalmeval serve --model echo --port {port}",
            "launch_timeout": 120, "batch_size": 4, **settings}


@pytest.mark.slow
def test_port_placeholder_gives_every_replica_its_own_free_port_and_a_resumed_run_reuses_its_answers(ws):
    """Run from a folder outside the repository with the venv's bin folder off PATH: the launch
    command still finds this environment's lalmeval."""
    ws.text_questions(6)
    config = ws.config([echo_entry(replicas=2)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    out = lalmeval("run", "--config", str(config), "--run-id", "t", cwd=ws.root, env=env)
    assert out.returncode == 0, out.stderr
    logs = sorted((ws.root / "runs" / "t").glob("launch_*.log"))
    assert [p.name for p in logs] == ["launch_echo-replica0.log", "launch_echo-replica1.log"]
    ports = {int(re.search(r"on http://127.0.0.1:(\d+)/v1", log.read_text()).group(1)) for log in logs}
    assert len(ports) == 2 and all(port_is_free(p) for p in ports)  # each replica had its own, and was stopped
    assert {urlsplit(r["extra"]["replica"]).port for r in ws.records("qs", "echo")} <= ports
    assert json.loads(ws.records("qs", "echo")[0]["prediction"])["parts"][0]["text"].startswith("question ")  # the echo server answered

    again = lalmeval("run", "--config", str(config), "--run-id", "t", cwd=ws.root, env=env)
    assert again.returncode == 0 and "Reused 6 stored prediction(s)" in again.stderr, again.stderr  # new ports, same server


@pytest.mark.parametrize("settings, message", [
    ({"launch": None}, "url uses {port} (a free port picked at run time): give a launch command that uses {port} too"),
    ({"launch": "lalmeval serve --model echo --port 8000"}, "give a launch command that uses {port} too"),
    ({"url": ["http://127.0.0.1:{port}/v1", "http://127.0.0.1:9/v1"]}, "{port} (a free port picked at run time) goes in a single url"),
    ({"url": "http://{port}.example/v1"}, "{port} stands for the port, as in http://127.0.0.1:{port}/v1"),
], ids=["no launch", "launch without {port}", "in a list", "not the port"])
def test_port_placeholder_settings_that_cannot_work_are_refused(ws, settings, message):
    ws.text_questions(1)
    ws.config([echo_entry(**settings)], [["qs", "accuracy"]])
    with pytest.raises(UserError, match="models") as caught:
        ws.plan()
    assert message in str(caught.value)


@pytest.mark.slow
def test_a_launch_that_fails_leaves_a_run_directory_that_reports_list_as_failed(ws):
    ws.text_questions(2)
    config = ws.config([echo_entry(launch="echo starting on {port}; exit 3")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    out = lalmeval("run", "--config", str(config), "--run-id", "broken", cwd=ws.root)
    assert out.returncode == 2 and "launch command exited with code 3" in out.stderr
    final = json.loads((ws.root / "runs" / "broken" / "final_scores.json").read_text())
    assert final["scores"] == [] and "exited with code 3" in final["launch_failed"]
    assert "starting on " in (ws.root / "runs" / "broken" / "launch_echo.log").read_text()

    ok = ws.config([echo_entry()], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    assert lalmeval("run", "--config", str(ok), "--run-id", "good", cwd=ws.root).returncode == 0
    board = lalmeval("report", *sorted(str(p) for p in (ws.root / "runs").iterdir() if not p.name.startswith(".")),
                     "--out", str(ws.root / "board.html"), cwd=ws.root)
    assert board.returncode == 0, board.stderr
    assert f"{ws.root / 'runs' / 'broken'}: failed before its first request: model 'echo': launch command exited with code 3" in board.stdout
    assert "│ echo" in board.stdout and "failed (model &#x27;echo&#x27;: launch command exited" in (ws.root / "board.html").read_text()


def test_python_m_models_inference_boilerplate_server_still_works_from_the_repository_root(ws):
    ws.text_questions(2)
    entry = echo_entry(launch=f"cd {REPO} && python -m models.inference_boilerplate.server --model echo --port {{port}}")
    config = ws.config([entry], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    out = lalmeval("run", "--config", str(config), "--run-id", "t", cwd=ws.root)
    assert out.returncode == 0, out.stderr


def test_a_launch_command_that_backgrounds_its_server_is_told_to_stay_in_the_foreground(ws):
    """A `cmd &` returns at once with exit code 0; the run could never stop what it left behind."""
    ws.text_questions(1)
    config = ws.config([echo_entry(launch="sleep 0 & exit 0  # would serve on {port}")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    out = lalmeval("run", "--config", str(config), "--run-id", "bg", cwd=ws.root)
    assert out.returncode == 2 and "exited with code 0" in out.stderr and "in the foreground" in out.stderr
