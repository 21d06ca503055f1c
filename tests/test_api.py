"""lalmeval.evaluate(): the Python entry point for notebooks and scripts."""

import asyncio
import json
import os
import signal
import subprocess
import sys

import pytest

import lalmeval
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import REPO, demo_rows, model


def commands(ws, count=3):
    rows = ws.copy_demo_audio(demo_rows(count))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    return rows


def test_evaluate_a_config_file_returns_the_scores_final_scores_json_holds(ws):
    commands(ws)
    with ScriptedEndpoint(lambda seen, n: "turn on the office heater") as ep:
        path = ws.config([model(ep.url)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"))
        result = lalmeval.evaluate(path, run_id="nb", quiet=True)
    assert isinstance(result, lalmeval.Evaluation) and result.complete
    assert result.run_dir == ws.root / "runs" / "nb"
    final = json.loads((result.run_dir / "final_scores.json").read_text())
    assert result.scores == final["scores"] and result.failures == final["failures"] == []
    score = result.scores[0]
    assert (score["model"], score["dataset"], score["metric"], score["num_samples"]) == ("m", "cmds", "word_error_rate", 3)
    assert 0 < score["score"] < 100  # one clip says exactly this, the others do not


def test_evaluate_a_dict_reads_relative_paths_from_the_current_directory(ws, monkeypatch, capsys):
    commands(ws)
    monkeypatch.chdir(ws.root)
    with ScriptedEndpoint() as ep:
        config = {"dataset_metric": [["cmds", "word_error_rate"]], "models": [model(ep.url, retry_attempts=0)],
                  "runspec_dirs": ["runspecs"], "output_dir": "runs"}
        result = lalmeval.evaluate(config, run_id="d")
    assert result.complete and result.scores[0]["num_samples"] == 3
    assert (ws.root / "runs" / "d" / "final_scores.json").is_file()
    assert "│ m     │ cmds    │ word_error_rate │   3 │      0 │" in capsys.readouterr().out  # not quiet: the table, as the CLI prints it


def test_quiet_prints_nothing_on_stdout_or_stderr_that_a_loud_run_prints(ws, capfd):
    """Everything a run may print: the score table, progress lines, a skipped dataset,
    the short-secret warning, and the progress bars `datasets` draws while it reads a hub-layout
    folder. quiet=True prints none of it (checked at the file descriptors), the same run without it
    prints all of it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = ws.root / "data" / "hubstyle"
    folder.mkdir(parents=True)
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(3)]
    pq.write_table(pa.Table.from_pylist(rows), folder / "test-00000.parquet")
    text = {"id_column": "id", "modality": "text", "textual_input_column": "question", "audio_column": None}
    ws.runspec("qa", "questions", {"qs": {"hf_repo": "data/hubstyle", **text},
                                   "qs_fr": {"hf_repo": "data/hubstyle", "language": "french", **text}})
    with ScriptedEndpoint(lambda seen, n: "answer 0") as ep:
        entry = model(ep.url, auth_token="tok1", model="tok1-model", retry_attempts=0)
        path = ws.config([entry], [["questions", "accuracy"]], output_dir=str(ws.root / "runs"), filters={"language": "en"})
        capfd.readouterr()
        quiet = lalmeval.evaluate(path, run_id="quiet", quiet=True)
        silent = capfd.readouterr()
        lalmeval.evaluate(path, run_id="loud")
        loud = capfd.readouterr()
    assert quiet.scores[0]["num_samples"] == 3 and quiet.complete
    assert (silent.out, silent.err) == ("", "")
    for printed in ("│ Model", "skipping dataset 'qs_fr'", "warning: models[m].auth_token is shorter", "qs × m: "):
        assert printed in loud.out + loud.err, printed


@pytest.mark.parametrize("config, message", [
    ({"dataset_metric": [["demo_commands", "word_error_rate"]], "model": []}, "config: unknown key 'model' (did you mean 'models'?)"),
    ({"dataset_metric": [["demo_commands", "word_eror_rate"]], "models": [{"name": "m", "url": "http://127.0.0.1:9/v1", "model": "m"}]},
     "config: dataset_metric[0]: unknown metric 'word_eror_rate' (did you mean 'word_error_rate'?)"),
    ("no/such/config.yaml", "no/such/config.yaml: config file not found"),
    (42, "config must be a path to a YAML file or a dict, got int"),
], ids=["unknown key", "unknown metric", "missing file", "wrong type"])
def test_bad_input_raises_user_error_naming_the_problem(config, message):
    with pytest.raises(lalmeval.UserError) as caught:
        lalmeval.evaluate(config)
    assert message in str(caught.value)


@pytest.mark.parametrize("run_loop", ["uvloop", "asyncio"])
def test_evaluate_works_inside_a_running_event_loop_as_in_a_notebook_cell(ws, monkeypatch, run_loop):
    if run_loop == "asyncio":
        monkeypatch.setitem(sys.modules, "uvloop", None)  # as where uvloop is not installed
    commands(ws, 2)
    kernel_handler = lambda signum, frame: None  # noqa: E731 - a kernel's own Ctrl-C handler

    async def cell():
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, woken.set)  # the kernel's loop handles signals too
        with ScriptedEndpoint() as ep:
            path = ws.config([model(ep.url)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"))
            result = lalmeval.evaluate(path, quiet=True)  # called synchronously, inside the kernel's loop
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(woken.wait(), 5)  # the kernel's loop still gets its signals afterwards
        loop.remove_signal_handler(signal.SIGUSR1)
        return result

    previous = signal.signal(signal.SIGINT, kernel_handler)
    try:
        result = asyncio.run(cell())
        assert signal.getsignal(signal.SIGINT) is kernel_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.complete and result.scores[0]["num_samples"] == 2


def test_importing_lalmeval_imports_no_evaluation_machinery():
    code = "import sys, lalmeval; print(sorted(m for m in sys.modules if m.split('.')[0] in {'aiohttp', 'pydantic', 'numpy', 'datasets', 'yaml', 'soundfile', 'scipy'} or m in {'lalmeval.api', 'lalmeval.config.schema', 'lalmeval.run.runner'}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
