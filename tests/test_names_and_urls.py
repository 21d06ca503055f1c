"""Names, URLs, config values and run ids of unusual shape: 300-character names, a ?query in a base URL,
nested ${A:-${B}} defaults, two runs in one second, and --debug keeping the documented exit codes."""

import json
import resource
import signal
import subprocess
import sys
import time

import pytest

from lalmeval.config.interpolate import interpolate
from lalmeval.errors import UserError
from lalmeval.results.store import NAME_MAX, file_name, safe_name
from lalmeval.run.runner import default_run_id
from tests.support.endpoint import ScriptedEndpoint, answer_by_number
from tests.support.workspace import REPO, model


def cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=REPO, capture_output=True, text=True, timeout=180, **kwargs)


# --- Long names ---------------------------------------------------------------------------------------


def test_names_of_any_length_make_file_names_within_the_limit_and_distinct_names_stay_distinct():
    long_a, long_b = "m" * 299 + "a", "m" * 299 + "b"
    for parts, suffix, prefix in (([long_a], ".jsonl", ""), (["d" * 300, long_a], ".jsonl", ""), (["d" * 300, "acc" * 90, long_a], ".jsonl", ""),
                                  ([long_a], ".log", "launch_"), (["模型" * 100, long_a], ".jsonl", "")):
        name = file_name(parts, suffix, prefix)
        assert len(name.encode()) <= NAME_MAX and name.startswith(prefix) and name.endswith(suffix)
        other = file_name([*parts[:-1], long_b], suffix, prefix)
        assert other != name and len(other.encode()) <= NAME_MAX
    assert file_name(["qs", "m"], ".jsonl") == f"{safe_name('qs')}__{safe_name('m')}.jsonl" == "qs__m.jsonl"  # short names: as always
    assert file_name(["%7E" * 100], ".jsonl").count("~") == 1  # a cut name ends in ~hash; '~' inside a name is escaped


def test_a_run_with_300_character_model_and_dataset_names_writes_every_file(ws):
    """File names used to be the names themselves: past 255 bytes every write failed."""
    dataset = "d" * 300
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(3)]
    ws.runspec("qa", "questions", {dataset: {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                             "textual_input_column": "question", "audio_column": None}})
    names = ["m" * 299 + "a", "m" * 299 + "b"]
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url, name=n) for n in names], [[dataset, "accuracy"]], output_dir=str(ws.root / "runs"), cache=True)
        out = cli("run", "--config", str(ws.root / "config.yaml"), "--run-id", "s")
    assert out.returncode == 0, out.stderr
    run = ws.root / "runs" / "s"
    for folder in ("records", "scores"):
        files = sorted((run / folder).iterdir())
        assert len(files) == 2 and all(len(f.name.encode()) <= NAME_MAX for f in files)
    assert len(list((ws.root / "runs" / ".cache").iterdir())) == 2
    final = json.loads((run / "final_scores.json").read_text())
    assert sorted(s["model"] for s in final["scores"]) == names and all(s["score"] == 100.0 for s in final["scores"])


# --- A ?query in the base URL --------------------------------------------------------------------------


@pytest.mark.parametrize("azure", [False, True])
def test_a_query_in_the_base_url_is_kept_and_the_api_path_goes_before_it(ws, azure):
    ws.text_questions(2)
    with ScriptedEndpoint(answer_by_number) as ep:
        settings = {"api_version": "2024-06-01", "auth_token": "key-0123456789"} if azure else {}
        ws.config([model(f"{ep.url}?tenant=lab&region=eu", **settings)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        result = ws.run()
        assert [r.path for r in ep.requests] == ["/v1/chat/completions"] * 2
        expected = {"tenant": "lab", "region": "eu", **({"api-version": "2024-06-01"} if azure else {})}
        assert all(r.query == expected for r in ep.requests)
    assert result.scores[0].score == 100.0


# --- Nested defaults in ${...} -------------------------------------------------------------------------


@pytest.mark.parametrize("env, value", [
    ({"A": "a", "B": "b"}, "a"),
    ({"B": "b"}, "b"),
    ({}, "x"),
    ({"A": ""}, ""),  # set but empty: the variable, as always
])
def test_a_default_may_itself_be_a_reference(monkeypatch, env, value):
    for name in ("A", "B"):
        monkeypatch.delenv(name, raising=False)
    for name, text in env.items():
        monkeypatch.setenv(name, text)
    assert interpolate({"url": "${A:-${B:-x}}"}, "c.yaml") == {"url": value}
    assert interpolate("<${A:-${B:-x}}>/${B:-y}", "c.yaml") == f"<{value}>/{env.get('B', 'y')}"


def test_an_unset_variable_is_an_error_only_where_its_default_is_used(monkeypatch):
    monkeypatch.delenv("LALM_UNSET", raising=False)
    monkeypatch.setenv("LALM_SET", "v")
    assert interpolate("${LALM_SET:-${LALM_UNSET}}", "c.yaml") == "v"
    with pytest.raises(UserError, match=r"c.yaml: environment variable 'LALM_UNSET' is not set \(used at models\[0\].url\)"):
        interpolate({"models": [{"url": "${LALM_OTHER_UNSET:-${LALM_UNSET}}"}]}, "c.yaml")
    assert interpolate("$5 ${ not a reference } ${A-b} ${1x}", "c.yaml") == "$5 ${ not a reference } ${A-b} ${1x}"


def test_a_nested_default_reaches_the_request(ws, monkeypatch):
    ws.text_questions(1)
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model("${LALM_PRIMARY_URL:-${LALM_FALLBACK_URL}}")], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = cli("run", "--config", str(ws.root / "config.yaml"), "--run-id", "s",
                  env={"PATH": "/usr/bin:/bin", "HOME": str(ws.root), "LALM_FALLBACK_URL": ep.url})
        assert len(ep.requests) == 1
    assert out.returncode == 0, out.stderr


# --- Two runs in one second ----------------------------------------------------------------------------


def test_runs_started_in_the_same_second_get_distinct_run_ids(tmp_path, monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20250101-120000")
    first, second, third = (default_run_id(tmp_path) for _ in range(3))
    assert (first, second, third) == ("20250101-120000", "20250101-120000-2", "20250101-120000-3")
    assert all((tmp_path / run_id).is_dir() for run_id in (first, second, third))


def test_a_second_run_in_the_same_second_is_a_new_run_not_a_resume_of_the_first(ws, monkeypatch, capsys):
    from lalmeval.cli.commands import main

    ws.text_questions(2)
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20250101-120000")
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        codes = [main(["run", "--config", str(ws.root / "config.yaml"), "--no-cache"]) for _ in range(2)]
        assert len(ep.requests) == 4  # the second run asked again: nothing was reused from the first
    assert codes == [0, 0]
    assert "Reused" not in capsys.readouterr().err
    assert sorted(p.name for p in (ws.root / "runs").iterdir()) == ["20250101-120000", "20250101-120000-2"]


# --- --debug shows the traceback and keeps the exit code ----------------------------------------------


@pytest.mark.slow
def test_debug_keeps_exit_2_for_bad_input(tmp_path):
    (tmp_path / "config.yaml").write_text("dataset_metric: [[x, accuracy]]\nmodels: []\nbogus: 1\n")
    for command in ("run", "validate"):
        out = cli(command, "--config", str(tmp_path / "config.yaml"), "--debug")
        assert out.returncode == 2, out.stderr
        assert "Traceback" in out.stderr and "unknown key 'bogus'" in out.stderr.strip().splitlines()[-1]


def test_debug_keeps_exit_4_for_a_refused_write(ws):
    ws.text_questions(2)

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))

    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = cli("run", "--config", str(ws.root / "config.yaml"), "--run-id", "full", "--debug", preexec_fn=small_files)
    assert out.returncode == 4, out.stderr
    assert "Traceback" in out.stderr and "File too large" in out.stderr.strip().splitlines()[-1]


def test_debug_keeps_exit_130_when_interrupted(ws):
    """Ctrl-C while a launched server is starting raises through the run: the traceback, then 130."""
    ws.text_questions(2)
    ws.config([model("http://127.0.0.1:9/v1", launch="sleep 30", launch_timeout=60)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
    proc = subprocess.Popen([sys.executable, "-m", "lalmeval", "run", "--config", str(ws.root / "config.yaml"), "--run-id", "i", "--debug"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log, deadline = ws.root / "runs" / "i" / "launch_m.log", time.time() + 60
    while not log.exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" in err and "interrupted while starting" in err.strip().splitlines()[-1]
