"""The seed formats as their tools write them, end to end: EvalScope message lists with audio and
`<audio k>` multiple choice, Twinkle Eval's folder of files, Kimi-Audio-Evalkit's dataset_root, and
AU-Harness's config key names."""

from __future__ import annotations

import base64
import gzip
import json

import pytest
import soundfile as sf

from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model


def clips(ws, count):
    """`count` demo clips copied to data/audio/, with their lengths (every demo clip has its own)."""
    rows = ws.copy_demo_audio(demo_rows(count))
    return [(r["audio"], sf.info(str(ws.root / "data" / r["audio"])).duration) for r in rows]


def parts_of(seen):
    """The user content as (type, text or clip seconds) in send order."""
    seconds = iter(seen.audio_seconds)
    out = []
    for message in seen.body["messages"]:
        if message["role"] != "user":
            continue
        for part in message["content"]:
            out.append((part["type"], part.get("text") if part["type"] == "text" else round(next(seconds), 3)))
    return out


# --- EvalScope general_vqa: audio parts in message lists ------------------------------------


def test_message_lists_carry_audio_as_base64_data_uris_and_paths_relative_to_the_data_file_in_place(ws):
    """input_audio with base64, audio_url with a data URI and with a local path (relative to the
    jsonl): each clip is decoded, resampled and sent where its part stands, between the texts."""
    (a, a_s), (b, b_s), (c, c_s) = clips(ws, 3)
    raw_b = base64.b64encode((ws.root / "data" / b).read_bytes()).decode()
    rows = [{"id": "x", "answer": "yes", "messages": [
        {"role": "system", "content": "You listen carefully."},
        {"role": "user", "content": [{"type": "text", "text": "First"}, {"type": "audio_url", "audio_url": {"url": a}},
                                     {"type": "text", "text": "then"}, {"type": "input_audio", "input_audio": {"data": raw_b, "format": "wav"}},
                                     {"type": "text", "text": "and last"},
                                     {"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64," + base64.b64encode((ws.root / "data" / c).read_bytes()).decode()}},
                                     {"type": "text", "text": "Same speaker?"}]}]}]
    ws.runspec("listen", "vqa", {"heard": {"hf_repo": ws.jsonl(rows, "data/heard.jsonl"), "format": "general_vqa", "language": "en",
                                           "metrics": ["accuracy"]}})
    with ScriptedEndpoint(lambda seen, n: "yes") as ep:
        ws.config([model(ep.url)], [["heard", "accuracy"]])
        result = ws.run()
        (seen,) = ep.requests
    assert parts_of(seen) == [("text", "First"), ("input_audio", round(a_s, 3)), ("text", "then"), ("input_audio", round(b_s, 3)),
                              ("text", "and last"), ("input_audio", round(c_s, 3)), ("text", "Same speaker?")]
    assert seen.system == "You listen carefully."
    assert result.complete and result.scores[0].score == 100.0


def test_a_message_list_whose_audio_cannot_be_had_fails_that_row_with_the_field(ws):
    (a, _), = clips(ws, 1)
    good = [{"role": "user", "content": [{"type": "text", "text": "ok"}, {"type": "audio_url", "audio_url": {"url": a}}]}]
    remote = [{"role": "user", "content": [{"type": "text", "text": "far"}, {"type": "audio_url", "audio_url": {"url": "https://example.com/a.wav"}}]}]
    rows = [{"id": "good", "messages": good, "answer": "yes"}, {"id": "remote", "messages": remote, "answer": "yes"}]
    ws.runspec("listen", "vqa", {"heard": {"hf_repo": ws.jsonl(rows, "data/heard.jsonl"), "format": "general_vqa", "language": "en"}})
    with ScriptedEndpoint(lambda seen, n: "yes") as ep:
        ws.config([model(ep.url)], [["heard", "bleu"]])
        ws.run()
        assert len(ep.requests) == 1
    error = {r["id"]: r["error"] for r in ws.records("heard", "m")}["remote"]
    assert error.startswith("data: messages[0].content[1].audio_url.url: audio at an http(s) URL is not fetched")


# --- EvalScope general_vmcq with <audio k> ---------------------------------------------------


def test_multiple_choice_audio_placeholders_put_each_clip_where_it_stands(ws):
    """EvalScope's general_vmcq with audio: `<audio k>` in the question and the options, clips in
    audio_1, audio_2, … The request interleaves them exactly there — the audio is never dropped
    into a text-only request."""
    (a, a_s), (b, b_s), (c, c_s) = clips(ws, 3)
    rows = [{"id": "q1", "question": "Listen: <audio 1> Which clip is the same voice?", "options": ["<audio 2>", "<audio 3>"],
             "answer": "A", "audio_1": a, "audio_2": b, "audio_3": c},
            {"id": "q2", "question": "<audio 1> How many words?", "options": ["three", "four"], "answer": "B", "audio_1": b}]
    ws.runspec("listen", "vmcq", {"pick": {"hf_repo": ws.jsonl(rows, "data/pick.jsonl"), "format": "general_vmcq", "language": "en"}})
    with ScriptedEndpoint(lambda seen, n: "A" if "same voice" in seen.text else "four") as ep:
        ws.config([model(ep.url)], [["pick", "accuracy"]])
        result = ws.run()
        sent = {("q1" if "same voice" in s.text else "q2"): parts_of(s) for s in ep.requests}
    assert [kind for kind, _ in sent["q1"]] == ["text", "input_audio", "text", "input_audio", "text", "input_audio", "text"]
    assert [v for kind, v in sent["q1"] if kind == "input_audio"] == [round(a_s, 3), round(b_s, 3), round(c_s, 3)]
    assert sent["q1"][0] == ("text", "Listen:") and sent["q1"][2][1].endswith("A.") and sent["q1"][4][1].strip() == "B."
    assert sent["q2"][0] == ("input_audio", round(b_s, 3))
    assert result.scores[0].score == 100.0 and result.complete


@pytest.mark.parametrize("row,reason", [
    ({"question": "Which is louder, <audio 1> or <audio 3>?", "audio_1": "A", "audio_2": "B"}, "data: <audio 3> refers to audio 3, but the sample has 2 audio clips"),
    ({"question": "What is in <image 2>?", "image_1": "three.png"}, "data: <image 2> refers to image 2, but the sample has 1 image"),
    ({"question": "Describe <image 1>."}, "data: <image 1> refers to image 1, but the sample has 0 images"),
])
def test_a_placeholder_without_its_media_fails_the_row_instead_of_sending_the_words(ws, row, reason):
    from pathlib import Path

    (a, _), (b, _) = clips(ws, 2)
    (ws.root / "data" / "three.png").write_bytes((Path(__file__).parent / "fixtures" / "images" / "three.png").read_bytes())
    paths = {"A": a, "B": b, "three.png": "three.png"}
    row = {k: paths.get(v, v) for k, v in row.items()}
    rows = [{"id": "bad", "options": ["one", "two"], "answer": "A", **row}, {"id": "fine", "question": "Plain?", "options": ["one", "two"], "answer": "A"}]
    ws.runspec("listen", "vmcq", {"pick": {"hf_repo": ws.jsonl(rows, "data/pick.jsonl"), "format": "general_vmcq", "language": "en"}})
    with ScriptedEndpoint(lambda seen, n: "A") as ep:
        ws.config([model(ep.url)], [["pick", "accuracy"]])
        result = ws.run()
        assert [s.text.split("\n")[0] for s in ep.requests] == ["Plain?"]
    errors = {r["id"]: r["error"] for r in ws.records("pick", "m")}
    assert errors == {"bad": reason, "fine": None}
    assert result.scores[0].num_failed == 1 and not result.complete


def test_validate_reads_every_selected_row_and_refuses_those_a_run_would_fail(ws):
    from lalmeval.cli.commands import main

    rows = [{"id": "q1", "question": "Hear <audio 1>", "options": ["a", "b"], "answer": "A"},
            {"id": "q2", "question": "Plain", "options": ["a", "b"], "answer": {"letter": "A"}},
            {"id": "q3", "question": "Plain", "options": ["a", "b"], "answer": "A"}]
    ws.runspec("listen", "vmcq", {"pick": {"hf_repo": ws.jsonl(rows, "data/pick.jsonl"), "format": "general_vmcq", "language": "en",
                                           "origin": "three hand-written rows"}})
    config = ws.config([model("http://127.0.0.1:9/v1")], [["pick", "accuracy"]])
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", "--config", str(config)])
    where = f"dataset 'pick' ({ws.root / 'runspecs' / 'listen' / 'vmcq.json'})"
    assert code == 2 and err.getvalue().splitlines() == [
        f"error: {where}: sample 'q1' would fail: data: <audio 1> refers to audio 1, but the sample has 0 audio clips (modality 'text' sends no audio)",
        f"error: {where}: sample 'q2' would fail: data: answer: an object (keys: letter) is not a text (a cell is never scored as its JSON); "
        "map the column that holds the text"]
    assert "origin of pick: three hand-written rows" in out.getvalue()


def test_an_audio_placeholder_in_a_dataset_that_sends_no_audio_says_why(ws):
    rows = [{"id": "q", "question": "What does <audio 1> say?", "reference": "hello", "audio": "x.wav"}]
    ws.runspec("qa", "text", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "textual_input_column": "question"}})
    with ScriptedEndpoint(lambda seen, n: "hello") as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]])
        ws.run()
        assert ep.requests == []
    assert ws.records("qs", "m")[0]["error"] == "data: <audio 1> refers to audio 1, but the sample has 0 audio clips (modality 'text' sends no audio)"


# --- Twinkle Eval: a folder of files, scored per file plus the average -----------------------

TWINKLE = {
    "basic_medical_science_train.csv": [("Which organ pumps blood?", "lungs", "heart", "liver", "skin", "B"),
                                        ("Which bone is in the arm?", "femur", "tibia", "humerus", "skull", "C")],
    "culinary_skills_dev.csv": [("Which is a spice?", "salt", "cumin", "water", "flour", "B"),
                                ("What boils pasta?", "oil", "water", "milk", "wine", "B"),
                                ("Which knife cuts bread?", "paring", "bread knife", "cleaver", "peeler", "B")],
    "nested/law_test.json": [("Which court is highest?", "district", "appeals", "supreme", "county", "C")],
}


def twinkle_folder(ws):
    import csv

    for name, rows in TWINKLE.items():
        path = ws.root / "data" / "tw" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        records = [dict(zip(["question", "A", "B", "C", "D", "answer"], row)) for row in rows]
        if name.endswith(".gz"):
            path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
        elif name.endswith(".csv"):
            with path.open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(records[0]))
                writer.writeheader()
                writer.writerows(records)
        else:
            path.write_text(json.dumps(records))
    ws.runspec("knowledge", "twinkle", {"tw": {"hf_repo": "data/tw", "format": "twinkle", "language": "en"}})


def test_a_twinkle_folder_is_scored_file_by_file_with_the_average_over_its_files(ws):
    """Twinkle Eval evaluates every file of a dataset folder and reports each file's accuracy and
    their average: `tw` is one dataset per file (`tw/<file>`), and the aggregate `tw` holds the
    unweighted mean over the files — Twinkle's average_accuracy — beside the sample-weighted one."""
    twinkle_folder(ws)
    wrong = {"Which bone is in the arm?", "Which is a spice?"}

    def answer(seen, n):
        row = next(r for rows in TWINKLE.values() for r in rows if r[0] in seen.text)
        return "A" if row[0] in wrong else row[5]

    with ScriptedEndpoint(answer) as ep:
        ws.config([model(ep.url)], [["tw", "accuracy"]])
        result = ws.run()
        assert len(ep.requests) == 6
    scores = {s.dataset: s.score for s in result.scores}
    assert scores == pytest.approx({"tw/basic_medical_science_train": 50.0, "tw/culinary_skills_dev": 100 * 2 / 3, "tw/nested/law_test": 100.0})
    (aggregate,) = result.aggregates
    assert aggregate["names"] == ["tw"] and aggregate["num_samples"] == 6
    assert aggregate["unweighted_mean"] == pytest.approx((50.0 + 100 * 2 / 3 + 100.0) / 3)
    assert aggregate["weighted_mean"] == pytest.approx(100 * 4 / 6)


def test_one_file_of_a_twinkle_folder_can_be_named_alone(ws):
    twinkle_folder(ws)
    with ScriptedEndpoint(lambda seen, n: "C") as ep:
        ws.config([model(ep.url)], [["tw/nested/law_test", "accuracy"]])
        result = ws.run()
        assert len(ep.requests) == 1
    assert [s.dataset for s in result.scores] == ["tw/nested/law_test"] and result.aggregates == []


def test_a_compressed_file_in_a_twinkle_folder_is_refused_not_left_out(ws, capsys):
    """Twinkle scores every file of the folder; one it cannot read (x.jsonl.gz) would be a subset missing from the average."""
    from lalmeval.cli.commands import main

    TWINKLE["zoology_test.jsonl.gz"] = [("Which animal barks?", "cat", "dog", "cow", "owl", "B")]
    try:
        twinkle_folder(ws)
    finally:
        del TWINKLE["zoology_test.jsonl.gz"]
    with ScriptedEndpoint(lambda seen, n: "B") as ep:
        ws.config([model(ep.url)], [["tw", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        assert ep.requests == []
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "dataset 'tw': zoology_test.jsonl.gz hold(s) data lalmeval does not read" in err[0], err


# --- any other folder of several data files: all of them, or a refusal -----------------------


def text_folder(ws, files: dict[str, list[dict]], **spec):
    folder = ws.root / "data" / "many"
    for name, rows in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".csv"):
            path.write_text("id,question,reference\n" + "".join(f"{r['id']},{r['question']},{r['reference']}\n" for r in rows))
        else:
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ws.runspec("qa", "many", {"many": {"hf_repo": "data/many", "id_column": "id", "modality": "text", "textual_input_column": "question",
                                       "audio_column": None, **spec}})


def q(i):
    return {"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"}


def test_a_folder_of_several_shards_is_one_dataset_over_all_of_them(ws):
    from tests.support.endpoint import answer_by_number

    text_folder(ws, {"part-a.jsonl": [q(0), q(1)], "part-b.jsonl": [q(2)], "more/part-c.jsonl": [q(3)]})
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url)], [["many", "accuracy"]])
        result = ws.run()
        assert len(ep.requests) == 4
    assert result.scores[0].num_samples == 4 and result.scores[0].score == 100.0


def test_split_files_of_a_folder_are_read_by_their_split_every_one(ws):
    from tests.support.endpoint import answer_by_number

    text_folder(ws, {"test-00000.jsonl": [q(0)], "test-00001.jsonl": [q(1)], "train.jsonl": [q(9)]})
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url)], [["many", "accuracy"]])
        ws.run()
        assert sorted(s.text for s in ep.requests) == ["question 0", "question 1"]


@pytest.mark.parametrize("files,problem", [
    ({"test.jsonl": [q(0)], "test_more.csv": [q(1)]}, "the files of split 'test' are of several types (test.jsonl, test_more.csv)"),
    ({"test.jsonl": [q(0)], "extra.jsonl": [q(1)]}, "extra.jsonl name(s) no split while other files do (test), so they would be left out"),
    ({"one.jsonl": [q(0)], "two.csv": [q(1)]}, "the files of split 'test' are of several types (one.jsonl, two.csv)"),
    ({"one.jsonl": [q(0)], "two.jsonl.gz": [q(1)]}, "two.jsonl.gz hold(s) data lalmeval does not read beside plain data files (one.jsonl)"),
    ({"one.jsonl": [q(0)], "sub/two.ndjson": [q(1)]}, "sub/two.ndjson hold(s) data lalmeval does not read beside plain data files (one.jsonl)"),
])
def test_a_folder_whose_files_cannot_all_be_read_is_refused_not_read_in_part(ws, capsys, files, problem):
    """`datasets` would read one type and drop the other, or drop files that name no split:
    the run stops with one line naming the folder and the files instead of evaluating a part."""
    from lalmeval.cli.commands import main

    text_folder(ws, files)
    with ScriptedEndpoint(lambda seen, n: "x") as ep:
        ws.config([model(ep.url)], [["many", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        assert ep.requests == []
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"{ws.root / 'data' / 'many'}: dataset 'many': {problem}" in err[0], err


def test_a_revision_on_a_local_folder_is_refused_it_would_be_ignored(ws):
    from lalmeval.data.source import open_source
    from lalmeval.config.schema import Filters
    from lalmeval.errors import UserError

    text_folder(ws, {"a.jsonl": [q(0)]}, revision="v2")
    ws.config([model("http://127.0.0.1:9/v1")], [["many", "accuracy"]])
    with pytest.raises(UserError, match=r"revision 'v2' names a hub revision, but .*many is a local folder of data files; drop revision"):
        open_source(ws.plan().catalog.datasets["many"], Filters())


# --- Kimi-Audio-Evalkit: dataset_root and the per-dataset path map ---------------------------


def kimi_rows(ws, root, series, name, count=2, relative_to_root=True, skip=0):
    """Kimi's downloader layout: <root>/<series>/<name>.jsonl with the clips in <root>/<series>/<name>/."""
    rows = demo_rows(count + skip)[skip:]
    folder = ws.root / root / series / name
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, row in enumerate(rows):
        from tests.support.workspace import DEMO
        import shutil

        shutil.copy(DEMO / row["audio"], folder / f"{i}.wav")
        path = f"{series}/{name}/{i}.wav" if relative_to_root else str(folder / f"{i}.wav")
        out.append({"index": i, "audio_path": path, "question": "", "answer": row["reference"], "subset": name})
    (ws.root / root / series / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    return out


def test_kimi_datasets_are_found_under_dataset_root_with_audio_paths_relative_to_it(ws):
    """dataset_root is Kimi's: `sdqa` (runspec hf_repo …/VoiceBench/sd-qa.jsonl, not there) is read from
    <root>/VoiceBench/sd-qa.jsonl, `libri` from <root>/LibriSpeech/LibriSpeech.jsonl, and the rows'
    relative audio paths start at the root, as Kimi-Audio-Evalkit writes them."""
    sdqa = kimi_rows(ws, "kimi_data", "VoiceBench", "sd-qa")
    libri = kimi_rows(ws, "kimi_data", "LibriSpeech", "LibriSpeech", count=1, skip=2)
    ws.runspec("kimi", "sets", {
        "sdqa": {"hf_repo": "private/kimi/VoiceBench/sd-qa.jsonl", "format": "kimi", "language": "en", "instruction": "Transcribe."},
        "libri": {"hf_repo": "private/kimi/LibriSpeech/LibriSpeech.jsonl", "format": "kimi", "language": "en", "instruction": "Transcribe."}})
    references = [r["answer"] for r in sdqa + libri]
    with ScriptedEndpoint(lambda seen, n: "x") as ep:
        ws.config([model(ep.url)], [["kimi", "word_error_rate"]], dataset_root="kimi_data")
        result = ws.run()
        assert len(ep.requests) == 3 and all(len(s.audio_seconds) == 1 for s in ep.requests)
    assert {s.dataset: s.num_samples for s in result.scores} == {"sdqa": 2, "libri": 1} and result.failures == []
    assert sorted(r["reference"] for d in ("sdqa", "libri") for r in ws.records(d, "m")) == sorted(references)


def test_dataset_paths_put_a_dataset_where_the_config_says_and_unknown_names_are_refused(ws):
    from lalmeval.errors import UserError

    kimi_rows(ws, "elsewhere", "MMAU", "mmau-test-mini", count=1, relative_to_root=False)
    ws.runspec("kimi", "sets", {"mmau": {"hf_repo": "private/kimi/MMAU/mmau-test-mini.jsonl", "format": "kimi", "language": "en"}})
    with ScriptedEndpoint(lambda seen, n: "x") as ep:
        ws.config([model(ep.url)], [["mmau", "word_error_rate"]], dataset_paths={"mmau": "elsewhere/MMAU/mmau-test-mini.jsonl"})
        result = ws.run()
        assert len(ep.requests) == 1
    assert result.scores[0].num_samples == 1 and result.failures == []
    ws.config([model("http://127.0.0.1:9/v1")], [["mmau", "word_error_rate"]], dataset_paths={"mmauu": "elsewhere/x.jsonl"})
    with pytest.raises(UserError, match=r"config.yaml: dataset_paths: unknown dataset 'mmauu' \(did you mean 'mmau'\?\)"):
        ws.plan()


def test_a_kimi_dataset_missing_under_dataset_root_names_where_it_was_looked_for(ws, capsys):
    from lalmeval.cli.commands import main

    kimi_rows(ws, "kimi_data", "VoiceBench", "sd-qa", count=1)
    ws.runspec("kimi", "sets", {
        "sdqa": {"hf_repo": "private/kimi/VoiceBench/sd-qa.jsonl", "format": "kimi", "language": "en"},
        "fleurs": {"hf_repo": "private/kimi/Fleurs/Fleurs-zh.jsonl", "format": "kimi", "language": "en"}})
    with ScriptedEndpoint(lambda seen, n: "x") as ep:
        ws.config([model(ep.url)], [["kimi", "word_error_rate"]], dataset_root="kimi_data", output_dir=str(ws.root / "runs"))
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        assert len(ep.requests) == 1
    root = ws.root / "kimi_data"
    err = capsys.readouterr().err
    assert code == 2 and (f"dataset 'fleurs': Fleurs-zh.jsonl not found under dataset_root {root} (looked at {root}/Fleurs-zh/Fleurs-zh.jsonl, "
                          f"{root}/Fleurs/Fleurs-zh.jsonl, {root}/Fleurs/Fleurs-zh/Fleurs-zh.jsonl)") in err, err


# --- AU-Harness's config key names ----------------------------------------------------------


def test_an_au_harness_config_runs_with_one_note_per_key_read_under_lalmevals_name(ws, capsys):
    """AU-Harness's sample config says task_metric, filter, judge_settings and generation_params_override.
    Each is read as lalmeval's key — and does what it says there: num_samples selects 2 of 3 samples,
    max_gen_tokens reaches the request as max_tokens, the judge is asked — with one note line each."""
    import yaml

    from lalmeval.cli.commands import main
    from tests.support.endpoint import answer_by_number

    ws.text_questions(3)
    with ScriptedEndpoint(answer_by_number) as ep, ScriptedEndpoint(lambda seen, n: "Rating: 1") as judge:
        config = {
            "task_metric": [["qs", "llm_judge_binary"]],
            "filter": {"num_samples": 2},
            "judge_settings": {"judge_model": "j", "judge_type": "openai", "judge_api_endpoint": judge.url, "judge_temperature": 0.0},
            "generation_params_override": [{"task": "qs", "generation_params": {"max_gen_tokens": 64, "temperature": 0.0}}],
            "models": [model(ep.url)], "runspec_dirs": ["runspecs"], "output_dir": str(ws.root / "runs"),
        }
        (ws.root / "au.yaml").write_text(yaml.safe_dump(config))
        code = main(["run", "--config", str(ws.root / "au.yaml"), "--run-id", "t"])
        assert [s.body["max_tokens"] for s in ep.requests] == [64, 64] and len(judge.requests) == 2
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    path = ws.root / "au.yaml"
    assert code == 0, err
    assert notes == [
        f"note: {path}: 'task_metric' is AU-Harness's name for 'dataset_metric'; read as dataset_metric",
        f"note: {path}: 'filter' is AU-Harness's name for 'filters'; read as filters (its `length` is length_filter)",
        f"note: {path}: 'judge_settings' is AU-Harness's name for 'judge_properties'; read as judge_properties",
        f"note: {path}: 'generation_params_override' is AU-Harness's name for 'generation_overrides'; read as generation_overrides "
        "(each entry's generation_params spread into it; max_gen_tokens and max_completion_tokens are max_tokens)",
        f"note: {path}: judge_properties.judge_type changes nothing: openai and vllm judges are asked the same way "
        "(POST {judge_api_endpoint}/chat/completions; judge_api_version makes it Azure style); the key can be dropped"]


@pytest.mark.parametrize("extra,message", [
    ({"prompt_overrides": {"user_prompt": [{"task": "qs", "prompt": "Answer."}]}},
     "'prompt_overrides' is AU-Harness's key, which lalmeval does not read: write them as prompt_rules"),
    ({"logging": {"log_file": "audiobench.log"}}, "'logging' is AU-Harness's key, which lalmeval does not read"),
    ({"task_metric": [["qs", "accuracy"]]}, "both 'dataset_metric' and 'task_metric' (AU-Harness's name for it) are given; keep 'dataset_metric'"),
])
def test_au_harness_keys_without_a_same_meaning_here_are_refused_naming_what_to_write(ws, extra, message):
    from lalmeval.config.schema import parse_config
    from lalmeval.errors import UserError

    raw = {"dataset_metric": [["qs", "accuracy"]], "models": [model("http://127.0.0.1:9/v1")], **extra}
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_config(raw, "au.yaml")
