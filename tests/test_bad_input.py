"""A corpus of malformed inputs: each gives one clear line naming the file / field / sample and
exit code 2 — or, for a single bad clip, a recorded failure while the run completes."""

import json
import os
import socket
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest
import soundfile as sf
import yaml

from lalmeval.cli.commands import main
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import REPO, demo_rows, model


def base(ws):
    rows = ws.copy_demo_audio(demo_rows(2))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id", "metrics": ["word_error_rate"]}})
    ws.config([model("http://127.0.0.1:9/v1", retry_attempts=0)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"))
    return rows


def edit_config(ws, change):
    path = ws.root / "config.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))


def edit_runspec(ws, change):
    path = ws.root / "runspecs" / "asr" / "commands.json"
    data = json.loads(path.read_text())
    change(data["cmds"])
    path.write_text(json.dumps(data))


def write(ws, name, text):
    path = ws.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_bytes(ws, name, data):
    path = ws.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def model_key(**change):
    return lambda ws: edit_config(ws, lambda d: d["models"][0]["info"].update(change))


ALIAS_BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))


def spec_path(ws, value):
    edit_runspec(ws, lambda s: s.update(hf_repo=f"../../{value}"))


CASES = {
    # --- configs ---------------------------------------------------------------------------
    "unknown top-level key": (lambda ws: edit_config(ws, lambda d: d.update(modles=[])), "unknown key 'modles' (did you mean 'models'?)"),
    "misspelt model key": (lambda ws: edit_config(ws, lambda d: d["models"][0]["info"].update(retry_atempts=2)), "unknown key 'models[0].retry_atempts' (did you mean 'retry_attempts'?)"),
    "wrong type": (lambda ws: edit_config(ws, lambda d: d["models"][0]["info"].update(batch_size="many")), "models[0].batch_size"),
    "zero batch size": (lambda ws: edit_config(ws, lambda d: d["models"][0]["info"].update(batch_size=0)), "models[0].batch_size: Input should be greater than or equal to 1"),
    "missing env var": (lambda ws: edit_config(ws, lambda d: d["models"][0]["info"].update(url="${LALM_UNSET_VAR}")), "environment variable 'LALM_UNSET_VAR' is not set"),
    "yaml syntax": (lambda ws: write(ws, "config.yaml", "models: [\n  - {name: m\n"), "invalid YAML at line"),
    "config is a list": (lambda ws: write(ws, "config.yaml", "- a\n- b\n"), "expected a mapping of keys at the top level"),
    "dataset_metric arity": (lambda ws: edit_config(ws, lambda d: d.update(dataset_metric=[["cmds", "word_error_rate", "x"]])), "dataset_metric[0]"),
    "unknown metric": (lambda ws: edit_config(ws, lambda d: d.update(dataset_metric=[["cmds", "bleu_score"]])), "unknown metric 'bleu_score'"),
    "unknown dataset": (lambda ws: edit_config(ws, lambda d: d.update(dataset_metric=[["cmd", "word_error_rate"]])), "unknown dataset, task type or category 'cmd' (did you mean 'cmds'?)"),
    "unknown inference type": (lambda ws: edit_config(ws, lambda d: d["models"][0]["info"].update(inference_type="grpc")), "models[0].inference_type"),
    "reversed length filter": (lambda ws: edit_config(ws, lambda d: d.update(filters={"length_filter": [5, 1]})), "length_filter must be [min_s, max_s]"),
    "replicas disagreeing": (lambda ws: edit_config(ws, lambda d: d["models"].append({"info": {**d["models"][0]["info"], "model": "other"}})),
                             "models: the entries named 'm' are replicas of one model, but their model differs"),
    "override of unknown task": (lambda ws: edit_config(ws, lambda d: d.update(temperature_overrides=[{"task": "asrr", "temperature": 1}])), "unknown dataset, task type or category 'asrr' (did you mean 'asr'?)"),
    "generation override of unknown task": (lambda ws: edit_config(ws, lambda d: d.update(generation_overrides=[{"task": "cmd", "top_p": 0.5}])),
                                            "generation_overrides[0].task: unknown dataset, task type or category 'cmd' (did you mean 'cmds'?)"),
    "aggregate of unknown name": (lambda ws: edit_config(ws, lambda d: d.update(aggregate=[["word_error_rate", ["nothing"]]])), "aggregate[0]: unknown dataset, task type or category 'nothing'"),
    "unknown prompt": (lambda ws: edit_config(ws, lambda d: d.update(filters={"user_prompt_add_ons": ["asr_clean"]})), "filters.user_prompt_add_ons: unknown prompt 'asr_clean' (did you mean 'asr_clean_output'?)"),
    "missing prompts file": (lambda ws: edit_config(ws, lambda d: d.update(prompts_file="nope.yaml")), "nope.yaml: prompts file not found"),
    "missing runspec dir": (lambda ws: edit_config(ws, lambda d: d.update(runspec_dirs=["runspecs", "elsewhere"])), "elsewhere: runspec directory not found"),
    "negative delay": (lambda ws: edit_config(ws, lambda d: d["models"][0]["info"].update(delay=-5)), "models[0].delay"),
    "infinite timeout": (model_key(timeout=float("inf")), "models[0].timeout: Input should be a finite number"),
    "infinite delay": (model_key(delay=float("inf")), "models[0].delay: Input should be a finite number"),
    "nan temperature": (model_key(temperature=float("nan")), "models[0].temperature: Input should be a finite number"),
    "temperature above 2": (model_key(temperature=7), "models[0].temperature: Input should be less than or equal to 2"),
    "absurd chunk size": (model_key(chunk_size=0.00001), "models[0].chunk_size: Input should be greater than or equal to 1"),
    "absurd batch size": (model_key(batch_size=10**9), "models[0].batch_size: Input should be less than or equal to 10000"),
    "url not a url": (model_key(url="not a url"), "models[0].url: 'not a url' is not a URL (it contains spaces"),
    "ftp url": (model_key(url="ftp://127.0.0.1/v1"), "models[0].url: 'ftp://127.0.0.1/v1' is not an http:// or https:// URL"),
    "url port out of range": (model_key(url="http://127.0.0.1:99999/v1"), "models[0].url: 'http://127.0.0.1:99999/v1' has an invalid port (1-65535)"),
    "url without host": (model_key(url="http:///v1"), "has no host"),
    "token with a newline": (model_key(auth_token="sk-abc\ndef"), "models[0].auth_token: contains a newline or control character"),
    "judge url invalid": (lambda ws: edit_config(ws, lambda d: d.update(judge_properties={"judge_model": "j", "judge_api_endpoint": "localhost:8000"})), "judge_properties.judge_api_endpoint: 'localhost:8000' is not an http:// or https:// URL"),
    "duplicate yaml key": (lambda ws: write(ws, "config.yaml", (ws.root / "config.yaml").read_text() + "output_dir: elsewhere\n"), "duplicate key 'output_dir' (first at line"),
    "yaml alias bomb": (lambda ws: write(ws, "config.yaml", ALIAS_BOMB), "expands to more than 200000 values through aliases"),
    "config not utf-8": (lambda ws: write_bytes(ws, "config.yaml", b"dataset_metric: [[cmds, word_error_rate]]\n# caf\xe9\n"), "config.yaml: config file is not valid UTF-8 (byte 0xe9"),
    "prompts file is a folder": (lambda ws: ((ws.root / "p.yaml").mkdir(), edit_config(ws, lambda d: d.update(prompts_file="p.yaml"))), "p.yaml: prompts file is a directory, expected a file"),
    "cache dir is a file": (lambda ws: (write(ws, "cachefile", "x"), edit_config(ws, lambda d: d.update(cache=True, cache_dir=str(ws.root / "cachefile")))), "cachefile: cache directory (cache_dir) is a file, expected a directory"),
    "output dir cannot be created": (lambda ws: edit_config(ws, lambda d: d.update(output_dir="/proc/lalmeval-test/runs")), "/proc/lalmeval-test/runs: output directory cannot be created"),
    # --- runspecs --------------------------------------------------------------------------
    "runspec bad json": (lambda ws: write(ws, "runspecs/asr/commands.json", '{"cmds": {"hf_repo": }'), "commands.json: invalid JSON at line 1"),
    "runspec is a list": (lambda ws: write(ws, "runspecs/asr/commands.json", "[1, 2]"), "commands.json: a runspec must be a JSON object"),
    "unknown preprocessor": (lambda ws: edit_runspec(ws, lambda s: s.update(preprocessor="FancyPreprocessor")), "dataset 'cmds': preprocessor: unknown preprocessor 'FancyPreprocessor'"),
    "unknown postprocessor": (lambda ws: edit_runspec(ws, lambda s: s.update(postprocessor="GeneralPostprocesor")), "unknown postprocessor 'GeneralPostprocesor' (did you mean 'GeneralPostprocessor'?)"),
    "unknown runspec field": (lambda ws: edit_runspec(ws, lambda s: s.update(audio_col="audio")), "dataset 'cmds': unknown field 'audio_col'"),
    "duplicate dataset": (lambda ws: write(ws, "runspecs/other/more.json", json.dumps({"cmds": {"hf_repo": "x", "language": "en"}})), "dataset 'cmds' is defined twice"),
    "unknown language": (lambda ws: edit_runspec(ws, lambda s: s.update(language="Elvish")), "unknown language 'Elvish'"),
    "metric all without metrics": (lambda ws: (edit_runspec(ws, lambda s: s.update(metrics=[])), edit_config(ws, lambda d: d.update(dataset_metric=[["cmds", "all"]]))), "metric 'all' but dataset 'cmds' lists no metrics"),
    "unknown normalizer": (lambda ws: edit_runspec(ws, lambda s: s.update(normalizer="whisper_englsh")), "commands.json: dataset 'cmds': normalizer: unknown normalizer 'whisper_englsh' (did you mean 'whisper_english'?)"),
    "bad error unit": (lambda ws: edit_runspec(ws, lambda s: s.update(error_unit="characters")), "commands.json: dataset 'cmds': error_unit: Input should be 'word', 'character' or 'mixed' (got 'characters') (did you mean 'character'?)"),
    "negative bootstrap resamples": (lambda ws: edit_config(ws, lambda d: d.update(bootstrap_resamples=-1)), "bootstrap_resamples: Input should be greater than or equal to 0"),
    "runspec missing language": (lambda ws: edit_runspec(ws, lambda s: s.pop("language")), "dataset 'cmds': language: Field required"),
    "runspec duplicate dataset key": (lambda ws: write(ws, "runspecs/asr/commands.json", (ws.root / "runspecs/asr/commands.json").read_text()[:-1] + ', "cmds": {"hf_repo": "x", "language": "en"}}'), "commands.json: duplicate key 'cmds'"),
    "runspec duplicate field": (lambda ws: write(ws, "runspecs/asr/commands.json", '{"cmds": {"hf_repo": "x", "language": "en", "language": "fr"}}'), "commands.json: duplicate key 'language'"),
    "runspec not utf-8": (lambda ws: write_bytes(ws, "runspecs/asr/commands.json", b'{"cmds": {"hf_repo": "x", "language": "en", "instruction": "caf\xe9"}}'), "commands.json: runspec is not valid UTF-8"),
    "runspec is a folder": (lambda ws: (ws.root / "runspecs/asr/folder.json").mkdir(), "folder.json: runspec is a directory, expected a file"),
    # --- data files ------------------------------------------------------------------------
    "missing column": (lambda ws: edit_runspec(ws, lambda s: s.update(target_column="text")), "target_column 'text' not found (columns:"),
    "empty data file": (lambda ws: (write(ws, "data/empty.jsonl", ""), spec_path(ws, "data/empty.jsonl")), "dataset 'cmds': the data has no rows"),
    "wrong data path": (lambda ws: spec_path(ws, "data/missing.jsonl"), "data file not found:"),
    "jsonl line not json": (lambda ws: (write(ws, "data/bad.jsonl", '{"audio": "a.wav"}\nnot json\n'), spec_path(ws, "data/bad.jsonl")), "bad.jsonl: line 2: invalid JSON"),
    "unsupported data type": (lambda ws: (write(ws, "data/set.xlsx", "x"), spec_path(ws, "data/set.xlsx")), "unsupported data file type '.xlsx'"),
    "duplicate sample ids": (lambda ws: (write(ws, "data/dup.jsonl", '{"id": "a", "audio": "x.wav", "reference": "r"}\n{"id": "a", "audio": "y.wav", "reference": "r"}\n'), spec_path(ws, "data/dup.jsonl")), "duplicate sample id 'a'"),
    "corrupt parquet": (lambda ws: (write(ws, "data/set.parquet", "PAR1 garbage"), spec_path(ws, "data/set.parquet")), "set.parquet: not a readable parquet file"),
    "csv unterminated quote": (lambda ws: (write(ws, "data/set.csv", 'id,audio,reference\na,x.wav,"turn on\nb,y.wav,lights off\nc,z.wav,stop\n'), spec_path(ws, "data/set.csv")), "set.csv: line 2: malformed CSV: unexpected end of data (an unterminated quote?)"),
    "csv stray quote": (lambda ws: (write(ws, "data/set.csv", 'id,audio,reference\na,x.wav,"turn" on\n'), spec_path(ws, "data/set.csv")), "set.csv: line 2: malformed CSV"),
    "csv row with extra fields": (lambda ws: (write(ws, "data/set.csv", 'id,audio,reference\na,x.wav,on\nb,y.wav,lights,off\n'), spec_path(ws, "data/set.csv")), "set.csv: line 3: 4 fields where the header has 3"),
    "tsv duplicate header": (lambda ws: (write(ws, "data/set.tsv", 'id\taudio\tid\na\tx.wav\tb\n'), spec_path(ws, "data/set.tsv")), "set.tsv: line 1: column 'id' appears twice"),
    "jsonl not utf-8": (lambda ws: (write_bytes(ws, "data/bad.jsonl", b'{"id": "a", "audio": "x.wav", "reference": "r"}\n{"id": "b", "audio": "y.wav", "reference": "caf\xe9"}\n'), spec_path(ws, "data/bad.jsonl")), "bad.jsonl: line 2: data file is not valid UTF-8"),
    "jsonl duplicate key": (lambda ws: (write(ws, "data/bad.jsonl", '{"id": "a", "audio": "x.wav", "reference": "r", "reference": "s"}\n'), spec_path(ws, "data/bad.jsonl")), "bad.jsonl: line 1: duplicate key 'reference'"),
    "data file is a folder": (lambda ws: ((ws.root / "data/folder.jsonl").mkdir(parents=True), spec_path(ws, "data/folder.jsonl")), "folder.jsonl: data file is a directory, expected a file"),
    "null sample id": (lambda ws: (write(ws, "data/ids.jsonl", '{"id": "a", "audio": "x.wav", "reference": "r"}\n{"id": null, "audio": "y.wav", "reference": "r"}\n'), spec_path(ws, "data/ids.jsonl")), "dataset 'cmds': row 2 has no id (column 'id' is null or missing)"),
    "empty sample id": (lambda ws: (write(ws, "data/ids.jsonl", '{"id": " ", "audio": "x.wav", "reference": "r"}\n'), spec_path(ws, "data/ids.jsonl")), "dataset 'cmds': row 1 has no id (column 'id' is empty)"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_malformed_input_gives_one_line_and_exit_2(ws, capsys, name):
    assert_one_line_and_exit_2(ws, capsys, *CASES[name])


def assert_one_line_and_exit_2(ws, capsys, corrupt, expected):
    base(ws)
    corrupt(ws)
    code = main(["run", "--config", str(ws.root / "config.yaml")])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert expected in lines[0], lines[0]
    # A refused run leaves no half-empty run folder behind (`lalmeval report runs/*` would trip on it).
    runs = ws.root / "runs"
    assert not runs.exists() or list(runs.iterdir()) == [], list(runs.rglob("*"))


def test_a_refused_resume_keeps_the_run_it_would_have_continued(ws, capsys):
    """Only a folder the refused run created is removed: an earlier run's folder, resumed with bad data, stays whole."""
    base(ws)
    code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "r"])
    assert code == 3   # the endpoint on port 9 is down: every sample failed, recorded
    kept = sorted(p.name for p in (ws.root / "runs" / "r").iterdir())
    spec_path(ws, "data/missing.jsonl")
    assert main(["run", "--config", str(ws.root / "config.yaml"), "--resume", "r"]) == 2
    assert "data file not found" in capsys.readouterr().err
    assert sorted(p.name for p in (ws.root / "runs" / "r").iterdir()) == kept


def zero_rate_wav(path):
    pcm = np.zeros(1600, dtype="<i2").tobytes()
    path.write_bytes(struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(pcm), b"WAVE", b"fmt ", 16, 1, 1, 0, 0, 2, 16, b"data", len(pcm)) + pcm)


def test_bad_clips_fail_their_samples_and_the_run_completes(ws, capsys):
    rows = ws.copy_demo_audio(demo_rows(1))
    audio = ws.root / "data" / "audio"
    flac = (ws.root / "data" / rows[0]["audio"]).read_bytes()
    (audio / "truncated.flac").write_bytes(flac[: len(flac) // 3])
    sf.write(audio / "empty.wav", np.zeros(0, dtype="float32"), 16000)
    (audio / "notaudio.mp3").write_text("this is not audio")
    sf.write(audio / "nan.wav", np.array([0.1, np.nan, 0.2] * 100, dtype="float32"), 16000, subtype="FLOAT")
    zero_rate_wav(audio / "zero_hz.wav")
    os.mkfifo(audio / "pipe.wav")            # would block a reader for ever
    (audio / "folder.wav").mkdir()
    bad = {"truncated": "truncated.flac", "empty": "empty.wav", "unsupported": "notaudio.mp3", "nan": "nan.wav", "zero_hz": "zero_hz.wav",
           "missing": "missing.wav", "named_pipe": "pipe.wav", "directory": "folder.wav"}
    data = [{"id": "good", "audio": rows[0]["audio"], "reference": rows[0]["reference"]}]
    data += [{"id": k, "audio": f"audio/{v}", "reference": "x"} for k, v in bad.items()]
    data.append({"id": "no_audio", "audio": None, "reference": "x"})
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(data), "id_column": "id"}})
    with ScriptedEndpoint(lambda s, n: rows[0]["reference"]) as ep:
        ws.config([model(ep.url)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"))
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "bad"])
    assert code == 3 and len(ep.requests) == 1  # failed samples: the exit code says so
    records = {r["id"]: r for r in ws.records("cmds", "m", "bad")}
    assert records["good"]["error"] is None
    for sample in [*bad, "no_audio"]:
        assert records[sample]["error"].startswith("audio: "), (sample, records[sample]["error"])
    assert "NaN" in records["nan"]["error"] and "no samples" in records["empty"]["error"]
    assert "sample rate" in records["zero_hz"]["error"] or "unreadable" in records["zero_hz"]["error"]
    assert "not a regular file" in records["named_pipe"]["error"] and "is a directory" in records["directory"]["error"]
    final = json.loads((ws.root / "runs" / "bad" / "final_scores.json").read_text())
    assert final["scores"][0]["num_failed"] == 9 and final["scores"][0]["score"] == 0.0
    assert "Failed samples:" in capsys.readouterr().out


def test_a_row_with_a_malformed_audio_span_fails_only_its_own_sample(ws):
    """Twenty speech rows; row 2's audio is `{"path": ..., "start": "abc", "end": 1}`: that row fails
    alone with a reason naming the column, and the other 19 are transcribed (the malformed span
    once ended the whole read, failing all 20 with `data: ValueError: could not convert ...`)."""
    rows = ws.copy_demo_audio(demo_rows(20))
    rows[1]["audio"] = {"path": rows[1]["audio"], "start": "abc", "end": 1}
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    with ScriptedEndpoint(lambda s, n: "ok") as ep:
        ws.config([model(ep.url)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"))
        main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        sent = len(ep.requests)
    records = {r["id"]: r for r in ws.records("cmds", "m")}
    failed = sorted(i for i, r in records.items() if r["error"])
    assert failed == [rows[1]["id"]], f"{len(failed)} samples failed ({records[failed[-1]]['error']!r}); {sent} requests sent"
    assert records[rows[1]["id"]]["error"] == "data: audio: span start 'abc' is not a number of seconds" and sent == 19


@pytest.mark.parametrize("length_filter", [None, [0, 100]])  # with a length filter, the selection scan reads the audio values too
def test_every_malformed_audio_value_fails_only_its_own_row_naming_the_column(ws, length_filter):
    rows = ws.copy_demo_audio(demo_rows(1))
    clip = rows[0]["audio"]
    bad = {"start_only": ({"path": clip, "start": 0.5}, "a span needs both start and end (got start 0.5, end None)"),
           "infinite_end": ({"path": clip, "start": 0, "end": float("inf")}, "span end inf is not a number of seconds"),
           "reversed": ({"path": clip, "start": 2, "end": 1}, "invalid span 2.000-1.000 s (expected 0 <= start < end)"),
           "boolean": ({"path": clip, "start": True, "end": 1}, "span start True is not a number of seconds"),
           "number": (5, "expected a path, bytes, {bytes, path} or {path, start, end}, got int '5'"),
           "text_bytes": ({"bytes": "RIFF....", "path": "x.wav"}, "'bytes' holds str, not bytes"),
           "in_a_list": ([clip, {"path": clip, "start": "soon", "end": 1}], "span start 'soon' is not a number of seconds")}
    data = [{"id": "good", "clip": clip, "reference": rows[0]["reference"]}] + [{"id": k, "clip": v, "reference": "x"} for k, (v, _) in bad.items()]
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(data), "id_column": "id", "audio_column": "clip"}})
    with ScriptedEndpoint(lambda s, n: rows[0]["reference"]) as ep:
        ws.config([model(ep.url)], [["cmds", "word_error_rate"]], output_dir=str(ws.root / "runs"), filters={"length_filter": length_filter})
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        sent = len(ep.requests)
    records = {r["id"]: r for r in ws.records("cmds", "m")}
    assert code == 3 and sent == 1 and records["good"]["error"] is None
    assert {k: records[k]["error"] for k in bad} == {k: f"data: clip: {reason}" for k, (_, reason) in bad.items()}


def test_a_row_whose_turns_or_image_cannot_be_read_fails_alone(ws):
    """Cells no ValueError describes — turns as JSON text nested 100 000 deep, an image struct whose
    'bytes' is text — fail their own row, not the read of every row after them."""
    data = [{"id": "good", "turns": ["Say hi.", "Again."], "reference": "hi"},
            {"id": "deep_turns", "turns": "[" * 100_000 + "]" * 100_000, "reference": "hi"},
            {"id": "text_bytes", "turns": ["Say hi."], "picture": {"bytes": "not bytes", "path": "x.png"}, "reference": "hi"},
            {"id": "after", "turns": ["Say hi."], "reference": "hi"}]
    ws.runspec("chat", "talk", {"talk": {"hf_repo": ws.jsonl(data), "id_column": "id", "modality": "text", "audio_column": None,
                                         "turns_column": "turns", "image_column": "picture"}})
    with ScriptedEndpoint(lambda s, n: "hi") as ep:
        ws.config([model(ep.url)], [["talk", "word_error_rate"]], output_dir=str(ws.root / "runs"))
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
    records = {r["id"]: r for r in ws.records("talk", "m")}
    assert code == 3 and records["good"]["error"] is None and records["after"]["error"] is None
    assert records["deep_turns"]["error"] == "data: turns: not a list (nor its JSON text)"
    assert records["text_bytes"]["error"] == "data: image struct's 'bytes' holds str, not bytes"


DEEP = "[" * 100_000 + "]" * 100_000  # past any recursive parser's reach (the run's own replies are guarded the same way)


def test_bad_input_a_deeply_nested_data_row_is_one_line_naming_the_file_and_line(ws, capsys):
    """A JSONL line nesting 100 000 lists deep is `<file>: line 2: invalid JSON: …`, exit 2 — not
    `internal error: RecursionError` naming neither the file nor the line."""
    (ws.root / "data").mkdir()
    (ws.root / "data" / "set.jsonl").write_text('{"id": "a", "question": "q", "reference": "r"}\n'
                                                '{"id": "b", "question": ' + DEEP + ', "reference": "r"}\n')
    ws.runspec("qa", "questions", {"qs": {"hf_repo": "data/set.jsonl", "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})
    with ScriptedEndpoint(lambda s, n: "r") as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
    err = capsys.readouterr().err
    assert code == 2
    assert "set.jsonl: line 2: invalid JSON: nested too deeply" in err and "internal error" not in err, err[-400:]


DEEP_FILES = {
    "config yaml": (lambda ws: write(ws, "config.yaml", (ws.root / "config.yaml").read_text() + "seed: " + DEEP + "\n"), "config.yaml: invalid YAML: nested too deeply"),
    "prompts yaml": (lambda ws: (write(ws, "p.yaml", "system_prompts: " + DEEP + "\n"), edit_config(ws, lambda d: d.update(prompts_file="p.yaml"))), "p.yaml: invalid YAML: nested too deeply"),
    "runspec json": (lambda ws: write(ws, "runspecs/asr/commands.json", '{"cmds": ' + DEEP + "}"), "commands.json: invalid JSON: nested too deeply"),
    "json array data": (lambda ws: (write(ws, "data/set.json", '[{"id": "a", "audio": ' + DEEP + "}]"), spec_path(ws, "data/set.json")), "set.json: invalid JSON: nested too deeply"),
}


@pytest.mark.parametrize("name", list(DEEP_FILES))
def test_every_file_nested_too_deeply_is_one_line_naming_it(ws, capsys, name):
    assert_one_line_and_exit_2(ws, capsys, *DEEP_FILES[name])


def test_a_tsv_cell_larger_than_the_csv_modules_default_limit_is_read(ws):
    """The csv module refuses fields over 128 KB unless told otherwise; a TSV cell may hold a base64
    image or a long passage, and it is data, not an unterminated quote."""
    long_text = "word " * 60_000  # 300 KB
    write(ws, "data/set.tsv", "id\tquestion\treference\na\t" + long_text + "\tr\nb\tshort\tr\n")
    ws.runspec("qa", "questions", {"qs": {"hf_repo": "data/set.tsv", "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})
    with ScriptedEndpoint(lambda s, n: "r") as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        sent = sorted(len(seen.text) for seen in ep.requests)
    assert code == 0 and sent == [len("short"), len(long_text.strip())]


def test_a_run_directory_whose_final_scores_are_nested_too_deeply_is_one_line(ws, capsys):
    write(ws, "runs/r/final_scores.json", '{"scores": ' + DEEP + "}")
    code = main(["report", str(ws.root / "runs" / "r"), "--out", str(ws.root / "board.html")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines == [f"error: {ws.root / 'runs' / 'r' / 'final_scores.json'}: not valid JSON (nested too deeply)"]


# --- files the run reads and writes: a named pipe (or a folder) where one belongs ---------------

RUN_FILES = {
    "cache file": (".cache/m.jsonl", "cache file is a named pipe"),
    "judge cache file": (".cache/judge_j.jsonl", "judge cache file is a named pipe"),
    "records file": ("p/records/qs__m.jsonl", "records file is a named pipe"),
    "scores file": ("p/scores/qs__llm_judge_binary__m.jsonl", "scores file is a named pipe"),
    "run config": ("p/config.yaml", "run config is a named pipe"),
    "final scores": ("p/final_scores.json", "final scores file is a named pipe"),
    "lock file": ("p/.lock", "lock file is a named pipe"),
    "launch log": ("p/launch_m.log", "launch log is a named pipe"),
}


def judged_questions(ws, judge_url, **model_settings):
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(2)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})
    return ws.config([model(model_settings.pop("url", "http://127.0.0.1:9/v1"), **model_settings)], [["qs", "llm_judge_binary"]],
                     output_dir=str(ws.root / "runs"), judge_properties={"judge_model": "j", "judge_api_endpoint": judge_url}, cache=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_cli(config, *args, timeout=60):
    """A run in its own process: a run blocked on a named pipe is killed, not waited for."""
    proc = subprocess.Popen([sys.executable, "-m", "lalmeval", *args, *(["--config", str(config)] if config else [])],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running after {timeout}s: blocked on a named pipe?")
    return proc.returncode, err


@pytest.mark.parametrize("name", list(RUN_FILES))
def test_a_named_pipe_where_a_run_file_belongs_is_one_line_and_exit_2(ws, name):
    """A named pipe (a leftover of a script, a shared folder) where the run reads or writes a file
    would block the run for ever on open(): it is refused before anything is launched or sent."""
    where, expected = RUN_FILES[name]
    with ScriptedEndpoint(lambda seen, n: "answer") as ep, ScriptedEndpoint(lambda seen, n: "Rating: 1") as judge_ep:
        # A launched server gets a free port of its own (one already answering would be refused first).
        served = {"url": f"http://127.0.0.1:{free_port()}/v1", "launch": "sleep 60"} if name == "launch log" else {"url": ep.url}
        config = judged_questions(ws, judge_ep.url, **served)
        pipe = ws.root / "runs" / where
        pipe.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(pipe)
        code, err = run_cli(config, "run", "--run-id", "p")
        assert not ep.requests and not judge_ep.requests
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert str(pipe) in lines[0] and expected in lines[0] and lines[0].endswith("expected a regular file"), lines[0]


def test_a_folder_where_the_cache_file_belongs_is_one_line_and_exit_2(ws, capsys):
    with ScriptedEndpoint(lambda seen, n: "answer") as ep, ScriptedEndpoint(lambda seen, n: "Rating: 1") as judge_ep:
        config = judged_questions(ws, judge_ep.url, url=ep.url)
        (ws.root / "runs" / ".cache" / "m.jsonl").mkdir(parents=True)
        code = main(["run", "--config", str(config), "--run-id", "p"])
        assert not ep.requests
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.endswith("m.jsonl: cache file is a directory, expected a regular file"), err


@pytest.mark.parametrize("scratch", ["final_scores.json.tmp", "config.yaml.tmp", "report.html.tmp"])
def test_a_named_pipe_left_where_the_run_writes_its_scratch_file_is_replaced(ws, scratch):
    """Whole files are written to a scratch name and renamed: whatever is left under that name goes."""
    with ScriptedEndpoint(lambda seen, n: "answer 0") as ep, ScriptedEndpoint(lambda seen, n: "Rating: 1") as judge_ep:
        config = judged_questions(ws, judge_ep.url, url=ep.url)
        (ws.root / "runs" / "p").mkdir(parents=True)
        os.mkfifo(ws.root / "runs" / "p" / scratch)
        code, err = run_cli(config, "run", "--run-id", "p")
    assert code == 0, err
    assert (ws.root / "runs" / "p" / "report.html").is_file() and not (ws.root / "runs" / "p" / scratch).exists()


def test_reading_or_appending_to_a_named_pipe_is_refused_before_it_is_opened(tmp_path):
    """The store's readers and writers refuse a named pipe instead of blocking on it (reports read
    records and scores after the run; a pipe may appear after the run's start-up check)."""
    from lalmeval.errors import UserError
    from lalmeval.results.store import JsonlWriter, WriteFailed, read_jsonl

    pipe = tmp_path / "scores.jsonl"
    os.mkfifo(pipe)
    outcome = {}

    def attempt():
        for name, call, error in (("read", lambda: list(read_jsonl(pipe, "scores file")), UserError), ("append", lambda: JsonlWriter(pipe), WriteFailed)):
            try:
                call()
                outcome[name] = "opened"
            except error as exc:
                outcome[name] = str(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # blocked in open(): release it before failing
        os.close(os.open(pipe, os.O_RDWR))
        pytest.fail("blocked opening a named pipe")
    assert outcome == {"read": f"{pipe}: scores file is a named pipe, expected a regular file",
                       "append": f"cannot write {pipe}: file is a named pipe, expected a regular file"}
