"""Data layouts (parquet, jsonl, csv, tsv, save_to_disk, local folder via load_dataset) and filters."""

import csv
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from lalmeval.config.schema import Filters
from lalmeval.data.source import iter_samples, open_source
from lalmeval.errors import UserError
from lalmeval.media.audio import AudioError, decode, prepare
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import DEMO, demo_rows, model

ROWS = demo_rows(4)


def struct_rows():
    return [{"audio": {"bytes": (DEMO / r["audio"]).read_bytes(), "path": r["audio"]}, "text": r["reference"], "uid": r["id"]} for r in ROWS]


def load(ws, spec):
    ws.runspec("asr", "layout", {"layout_set": spec})
    plan_ds = ws.plan().catalog.datasets["layout_set"]
    return list(iter_samples(plan_ds))


def assert_real_speech(samples):
    assert [s.reference for s in samples] == [r["reference"] for r in ROWS]
    for sample in samples:
        audio = decode(sample.audio[0].source)
        assert 0.5 < len(audio) / 16000 < 6


@pytest.fixture
def cfg(ws):
    ws.config([model("http://127.0.0.1:9/v1")], [["layout_set", "word_error_rate"]])
    return ws


def test_parquet_with_hf_audio_structs(cfg):
    (cfg.root / "data").mkdir()
    pq.write_table(pa.Table.from_pylist(struct_rows()), cfg.root / "data" / "set.parquet")
    samples = load(cfg, {"hf_repo": "data/set.parquet", "target_column": "text", "id_column": "uid"})
    assert_real_speech(samples)
    assert samples[0].id == ROWS[0]["id"] and isinstance(samples[0].audio[0].source, bytes)


def test_jsonl_with_paths_relative_to_the_data_file(cfg):
    rows = cfg.copy_demo_audio(ROWS)
    assert_real_speech(load(cfg, {"hf_repo": cfg.jsonl(rows)}))


@pytest.mark.parametrize("suffix,delimiter", [("csv", ","), ("tsv", "\t")])
def test_csv_and_tsv_with_audio_paths(cfg, suffix, delimiter):
    rows = cfg.copy_demo_audio(ROWS)
    with (cfg.root / "data" / f"set.{suffix}").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["audio", "reference"], delimiter=delimiter, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    assert_real_speech(load(cfg, {"hf_repo": f"data/set.{suffix}"}))


def test_save_to_disk_folder_with_audio_feature(cfg):
    from datasets import Audio, Dataset

    ds = Dataset.from_list(struct_rows()).cast_column("audio", Audio(decode=False))
    ds.save_to_disk(str(cfg.root / "data" / "saved"))
    assert_real_speech(load(cfg, {"hf_repo": "data/saved", "target_column": "text"}))


@pytest.mark.parametrize("streaming", [False, True])
def test_local_folder_goes_through_load_dataset_like_the_hub(cfg, streaming):
    folder = cfg.root / "data" / "hubstyle"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(struct_rows()), folder / "test-00000.parquet")
    cfg.runspec("asr", "layout", {"layout_set": {"hf_repo": "data/hubstyle", "target_column": "text"}})
    dataset = cfg.plan().catalog.datasets["layout_set"]
    assert_real_speech(list(iter_samples(dataset, streaming=streaming)))


def test_missing_column_names_the_field_and_the_columns(cfg):
    rows = cfg.copy_demo_audio(ROWS)
    with pytest.raises(UserError, match=r"target_column 'transcript' not found \(columns: audio, id, noise, rate, reference, voice\)"):
        load(cfg, {"hf_repo": cfg.jsonl(rows), "target_column": "transcript"})


def test_missing_data_file_and_empty_file_are_clear_errors(cfg):
    with pytest.raises(UserError, match=r"data file not found: .*nothing.jsonl"):
        load(cfg, {"hf_repo": "data/nothing.jsonl"})
    cfg.jsonl([], "data/empty.jsonl")
    with pytest.raises(UserError, match="the data has no rows"):
        load(cfg, {"hf_repo": "data/empty.jsonl"})


def test_corrupt_clip_fails_only_its_sample_with_the_reason(ws):
    rows = ws.copy_demo_audio(demo_rows(3))
    clip = ws.root / "data" / rows[1]["audio"]
    clip.write_bytes(clip.read_bytes()[:200])  # truncated FLAC
    ws.runspec("asr", "layout", {"layout_set": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    with ScriptedEndpoint(lambda s, n: "hello") as ep:
        ws.config([model(ep.url)], [["layout_set", "word_error_rate"]])
        score = ws.run().scores[0]
    assert len(ep.requests) == 2
    assert (score.num_samples, score.num_failed) == (3, 1)
    failed = [r for r in ws.records("layout_set", "m") if r["error"]]
    assert failed[0]["id"] == rows[1]["id"] and failed[0]["error"].startswith("audio: ")


def test_decode_resamples_and_downmixes_and_rejects_bad_audio(tmp_path):
    stereo = np.stack([np.linspace(-0.5, 0.5, 44100), np.zeros(44100)], axis=1).astype("float32")
    sf.write(tmp_path / "s.wav", stereo, 44100)
    mono = decode(str(tmp_path / "s.wav"))
    assert mono.ndim == 1 and abs(len(mono) - 16000) <= 1
    sf.write(tmp_path / "nan.wav", np.array([0.0, np.nan, 0.1], dtype="float32"), 16000, subtype="FLOAT")
    with pytest.raises(AudioError, match="NaN"):
        decode(str(tmp_path / "nan.wav"))
    sf.write(tmp_path / "empty.wav", np.zeros(0, dtype="float32"), 16000)
    with pytest.raises(AudioError, match="no samples"):
        decode(str(tmp_path / "empty.wav"))
    with pytest.raises(AudioError, match="not readable|unreadable"):
        decode(str(tmp_path / "missing.wav"))


def test_prepared_audio_round_trips_16_bit_sources_exactly():
    path = DEMO / ROWS[0]["audio"]
    original, _ = sf.read(path, dtype="int16")
    assert np.array_equal(prepare(str(path)).pcm, original)


# --- filters -------------------------------------------------------------------------------


def filtered(ws, filters, seed=0, **spec):
    rows = ws.copy_demo_audio(demo_rows(12))
    ws.runspec("asr", "layout", {"layout_set": {"hf_repo": ws.jsonl(rows), "id_column": "id", **spec}})
    ws.config([model("http://127.0.0.1:9/v1")], [["layout_set", "word_error_rate"]])
    dataset = ws.plan().catalog.datasets["layout_set"]
    return [s.id for s in open_source(dataset, Filters(**filters), seed).samples()], rows


def test_num_samples_takes_the_first_n(ws):
    ids, rows = filtered(ws, {"num_samples": 3})
    assert ids == [r["id"] for r in rows[:3]]


def test_shuffle_draws_n_with_the_seed_reproducibly(ws):
    first, rows = filtered(ws, {"num_samples": 4, "shuffle": True}, seed=1)
    again, _ = filtered(ws, {"num_samples": 4, "shuffle": True}, seed=1)
    other, _ = filtered(ws, {"num_samples": 4, "shuffle": True}, seed=2)
    assert first == again and first != other and len(first) == 4
    assert first != [r["id"] for r in rows[:4]]


def test_length_filter_drops_clips_outside_range(ws):
    ids, rows = filtered(ws, {"length_filter": [1.8, 2.5]})
    lengths = {r["id"]: sf.info(str(ws.root / "data" / r["audio"])).duration for r in rows}
    assert ids and all(1.8 <= lengths[i] <= 2.5 for i in ids)
    assert len(ids) < len(rows)


def test_language_filter_by_row_column(ws):
    rows = ws.copy_demo_audio(demo_rows(4))
    for row, lang in zip(rows, ["en", "English", "fr", "de"]):
        row["lang"] = lang
    ws.runspec("asr", "layout", {"layout_set": {"hf_repo": ws.jsonl(rows), "language": "multilingual", "language_column": "lang"}})
    ws.config([model("http://127.0.0.1:9/v1")], [["layout_set", "word_error_rate"]])
    dataset = ws.plan().catalog.datasets["layout_set"]
    kept = list(open_source(dataset, Filters(language="en"), 0).samples())
    assert [s.language for s in kept] == ["en", "English"]


def test_language_and_accent_filters_skip_whole_datasets(ws):
    rows = ws.copy_demo_audio(demo_rows(1))
    ws.runspec("asr", "mixed", {
        "english_plain": {"hf_repo": ws.jsonl(rows)},
        "english_accented": {"hf_repo": ws.jsonl(rows), "accented": True},
        "french_plain": {"hf_repo": ws.jsonl(rows), "language": "french"},
    })
    ws.config([model("http://127.0.0.1:9/v1")], [["mixed", "word_error_rate"]], filters={"language": "en", "accented": False})
    plan = ws.plan()
    assert [d.name for d in plan.datasets] == ["english_plain"]
    assert set(plan.skipped) == {"english_accented", "french_plain"}


def _run_cli(ws, *argv):
    from lalmeval.cli.commands import main

    return main(["run", "--config", str(ws.root / "config.yaml"), "--output-dir", str(ws.root / "runs"), "--run-id", "t", *argv])


def test_a_length_filter_that_empties_one_dataset_ends_the_run_with_exit_2_naming_it_while_the_others_run(ws, capsys):
    """The demo clips last 1–3 s: [10, 20] s keeps none of `longclips`. The other dataset (text only,
    which a length filter does not touch) is evaluated; the run ends with exit 2 and one line naming
    the dataset and the filter — never exit 0 with a null score."""
    rows = ws.copy_demo_audio(demo_rows(3))
    ws.runspec("asr", "layout", {"longclips": {"hf_repo": ws.jsonl(rows, "data/clips.jsonl"), "id_column": "id"}})
    ws.text_questions(2)
    with ScriptedEndpoint(lambda seen, n: "answer 0") as ep:
        ws.config([model(ep.url)], [["longclips", "word_error_rate"], ["qs", "accuracy"]], filters={"length_filter": [10, 20]})
        code = _run_cli(ws)
        sent = len(ep.requests)
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if "longclips" in x]
    assert code == 2 and sent == 2, err
    assert line == [f"error: dataset 'longclips' was not evaluated: {ws.root / 'data' / 'clips.jsonl'}: dataset 'longclips': no sample selected — "
                    "filters.length_filter [10, 20] s left out 3 of its 3 row(s)"], err
    assert "1 dataset(s) were not evaluated (see above); the others were." in err
    assert len(ws.records("qs", "m")) == 2


def test_a_selection_that_keeps_nothing_is_exit_2_with_one_line(ws, capsys):
    rows = ws.copy_demo_audio(demo_rows(3))
    ws.runspec("asr", "layout", {"longclips": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    with ScriptedEndpoint(lambda seen, n: "x") as ep:
        ws.config([model(ep.url)], [["longclips", "word_error_rate"]], filters={"length_filter": [10, 20], "num_samples": 2})
        code = _run_cli(ws)
        assert ep.requests == []
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].endswith("no sample selected — filters.length_filter [10, 20] s left out 3 of its 3 row(s)")


def test_a_streamed_dataset_whose_row_language_filter_keeps_nothing_is_exit_2_naming_the_filter(ws, capsys):
    """A stream is selected while it is read: only at its end is it known that nothing was kept."""
    folder = ws.root / "data" / "hubstyle"
    folder.mkdir(parents=True)
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}", "lang": "fr"} for i in range(4)]
    pq.write_table(pa.Table.from_pylist(rows), folder / "test-00000.parquet")
    ws.runspec("qa", "streamed", {"qs": {"hf_repo": "data/hubstyle", "id_column": "id", "modality": "text", "language": "multilingual",
                                          "language_column": "lang", "textual_input_column": "question", "audio_column": None}})
    with ScriptedEndpoint(lambda seen, n: "answer 0") as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], streaming=True, filters={"language": "de"})
        code = _run_cli(ws)
        assert ep.requests == []
    err = capsys.readouterr().err
    assert code == 2, err
    assert "error: dataset 'qs' was not evaluated: " in err
    assert "dataset 'qs': no sample selected — filters.language 'de' (language_column 'lang') left out 4 of its 4 row(s)" in err


def test_dataset_level_filters_that_leave_an_entry_nothing_are_refused_at_start(ws):
    rows = ws.copy_demo_audio(demo_rows(1))
    ws.runspec("asr", "mixed", {"english_plain": {"hf_repo": ws.jsonl(rows)}, "french_plain": {"hf_repo": ws.jsonl(rows), "language": "french"}})
    ws.config([model("http://127.0.0.1:9/v1")], [["mixed", "word_error_rate"], ["french_plain", "word_error_rate"]], filters={"language": "en"})
    with pytest.raises(UserError, match=r"dataset_metric\[1\]: the filters leave out dataset 'french_plain', so nothing would be evaluated "
                                        r"\(french_plain: filters.language 'en': its language is fr\)"):
        ws.plan()
    ws.config([model("http://127.0.0.1:9/v1")], [["mixed", "word_error_rate"]], filters={"language": "de"})
    with pytest.raises(UserError, match=r"dataset_metric\[0\]: the filters leave out every dataset of 'mixed'"):
        ws.plan()


def test_config_seed_and_shuffle_choose_the_samples_a_run_sends(ws):
    rows = ws.copy_demo_audio(demo_rows(12))
    ws.runspec("asr", "layout", {"layout_set": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    chosen = {}
    for seed in (1, 2):
        with ScriptedEndpoint(lambda s, n: "x") as ep:
            ws.config([model(ep.url)], [["layout_set", "word_error_rate"]], seed=seed, filters={"num_samples": 3, "shuffle": True})
            ws.run(f"seed{seed}")
        chosen[seed] = sorted(r["id"] for r in ws.records("layout_set", "m", f"seed{seed}"))
        assert len(ep.requests) == 3
    assert chosen[1] != chosen[2]


def test_config_streaming_reaches_load_dataset(ws, monkeypatch):
    """`streaming: true` streams through `datasets`, except parquet data files, which are streamed by
    lalmeval's own page reader (the parquet streaming of `datasets` decodes whole row groups)."""
    import datasets

    folder = ws.root / "data" / "hubstyle"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(struct_rows()), folder / "test-00000.parquet")
    (ws.root / "data" / "jsonstyle").mkdir()
    (ws.root / "data" / "jsonstyle" / "test.jsonl").write_text("".join(json.dumps({"uid": r["uid"], "text": r["text"]}) + "\n" for r in struct_rows()))
    ws.runspec("asr", "layout", {"layout_set": {"hf_repo": "data/hubstyle", "target_column": "text"},
                                 "json_set": {"hf_repo": "data/jsonstyle", "target_column": "text", "modality": "text", "textual_input_column": "text", "audio_column": None}})
    seen = []
    real = datasets.load_dataset
    def folder(args, kwargs):  # a local folder is loaded by its data files' builder ("json") with data_files listed
        files = kwargs.get("data_files")
        first = next(iter(files.values())) if isinstance(files, dict) else files
        first = first[0] if isinstance(first, (list, tuple)) else first
        return Path(first).parent.name if first else args[0].rsplit("/", 1)[-1]

    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: seen.append((folder(a, k), k["streaming"])) or real(*a, **k))
    with ScriptedEndpoint(lambda s, n: "x") as ep:
        for streaming in (True, False):
            ws.config([model(ep.url)], [["layout_set", "word_error_rate"], ["json_set", "word_error_rate"]], streaming=streaming)
            assert [s.num_samples for s in ws.run().scores] == [len(ROWS)] * 2
    assert sorted(seen) == [("hubstyle", False), ("jsonstyle", False), ("jsonstyle", True)]


def concurrent_layouts(ws, count):
    """`count` hub-layout folders and `count` save_to_disk folders, each its own dataset."""
    from datasets import Audio, Dataset

    specs = {}
    for i in range(count):
        folder = ws.root / "data" / f"hub{i}"
        folder.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(struct_rows()), folder / "test-00000.parquet")
        specs[f"hub{i}"] = {"hf_repo": f"data/hub{i}", "target_column": "text", "id_column": "uid"}
        Dataset.from_list(struct_rows()).cast_column("audio", Audio(decode=False)).save_to_disk(str(ws.root / "data" / f"disk{i}"))
        specs[f"disk{i}"] = {"hf_repo": f"data/disk{i}", "target_column": "text", "id_column": "uid"}
    ws.runspec("asr", "many", specs)
    ws.config([model("http://127.0.0.1:9/v1")], [["many", "word_error_rate"]])
    return [d for d, _ in ws.plan().pairs]


def load_all_at_once(datasets):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(datasets)) as pool:
        return list(pool.map(lambda d: list(iter_samples(d)), datasets))


def test_datasets_loading_at_the_same_time_never_enter_the_library_together(ws, monkeypatch):
    """The library's loaders share global state (tqdm's lock among it): calls into them are serialized."""
    import threading
    import time

    import datasets

    datasets_list = concurrent_layouts(ws, 3)
    active, most = [0], [0]
    guard = threading.Lock()

    def counting(real):
        def wrapper(*args, **kwargs):
            with guard:
                active[0] += 1
                most[0] = max(most[0], active[0])
            try:
                time.sleep(0.05)  # widen the window in which a second load could enter
                return real(*args, **kwargs)
            finally:
                with guard:
                    active[0] -= 1
        return wrapper

    monkeypatch.setattr(datasets, "load_dataset", counting(datasets.load_dataset))
    monkeypatch.setattr(datasets, "load_from_disk", counting(datasets.load_from_disk))
    loaded = load_all_at_once(datasets_list)
    assert most[0] == 1
    assert all([s.reference for s in samples] == [r["reference"] for r in ROWS] for samples in loaded)


def test_many_hub_and_disk_folders_load_concurrently_again_and_again(ws):
    datasets_list = concurrent_layouts(ws, 4)
    for _ in range(5):
        loaded = load_all_at_once(datasets_list)
        assert [len(samples) for samples in loaded] == [len(ROWS)] * len(datasets_list)


@pytest.mark.parametrize("layout,streaming", [("hub folder", False), ("hub folder", True), ("save_to_disk", False)])
def test_audio_nested_in_lists_and_structs_is_read_as_stored_never_decoded(cfg, layout, streaming):
    """`datasets` decodes Audio() and Image() only through torchcodec / Pillow (torchcodec is absent
    here, as on many machines): a list of clips (MT-Bench's `[Audio()]`), a clip inside a struct
    and an image must come out as {bytes, path}, however deep, not as an ImportError that fails the
    whole dataset."""
    from datasets import Audio, Dataset, Image, List, Value

    image = b"\x89PNG\r\n\x1a\n" + bytes(32)
    clips = [r["audio"] for r in struct_rows()]
    rows = [{"uid": r["id"], "text": r["reference"], "clips": [clips[i], clips[(i + 1) % 4]], "speech": {"clip": clips[i], "lang": "en"},
             "picture": {"bytes": image, "path": "x.png"}} for i, r in enumerate(ROWS)]
    ds = Dataset.from_list(rows).cast_column("clips", List(Audio())).cast_column("speech", {"clip": Audio(), "lang": Value("string")})
    ds = ds.cast_column("picture", Image())
    if layout == "hub folder":
        (cfg.root / "data" / "nested").mkdir(parents=True)
        ds.to_parquet(str(cfg.root / "data" / "nested" / "test-00000.parquet"))
    else:
        ds.save_to_disk(str(cfg.root / "data" / "nested"))
    spec = {"hf_repo": "data/nested", "target_column": "text", "id_column": "uid", "image_column": "picture"}
    cfg.runspec("asr", "layout", {"in_a_list": {**spec, "audio_column": "clips"}, "in_a_struct": {**spec, "audio_column": "speech"}})
    cfg.config([model("http://127.0.0.1:9/v1")], [["layout", "word_error_rate"]])
    catalog = cfg.plan().catalog
    in_a_list = list(iter_samples(catalog.datasets["in_a_list"], streaming=streaming))
    assert [s.id for s in in_a_list] == [r["id"] for r in ROWS]
    assert [[a.source for a in s.audio] for s in in_a_list] == [[c["bytes"], clips[(i + 1) % 4]["bytes"]] for i, c in enumerate(clips)]
    assert all(s.images[0].source == image for s in in_a_list)
    # A struct holding a clip is not a clip: it fails its own rows, saying what it holds.
    in_a_struct = list(iter_samples(catalog.datasets["in_a_struct"], streaming=streaming))
    assert [s.problem for s in in_a_struct] == ["data: speech: a clip struct holds 'bytes' or 'path' (keys: clip, lang)"] * 4


def corrupt_column(path, column):
    """Overwrite the bytes of `column`'s chunks in a parquet file: reading that column fails, the others read."""
    import pyarrow.parquet as pq_

    meta = pq_.ParquetFile(path).metadata
    data = bytearray(path.read_bytes())
    for group in range(meta.num_row_groups):
        for i in range(meta.num_columns):
            chunk = meta.row_group(group).column(i)
            if chunk.path_in_schema.split(".")[0] == column:
                start = chunk.dictionary_page_offset or chunk.data_page_offset
                data[start:start + chunk.total_compressed_size] = b"\xab" * chunk.total_compressed_size
    path.write_bytes(bytes(data))
    with pytest.raises(OSError):
        pq_.ParquetFile(path).read_row_group(0)


def test_a_text_only_control_never_reads_the_audio_column_it_does_not_map(ws):
    """The text-only control of a spoken benchmark shares its data file: its rows are read without
    the audio column (shown here by an audio column that cannot be read at all), which also keeps
    the clips' bytes out of memory."""
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}", **struct_rows()[i]} for i in range(4)]
    (ws.root / "data").mkdir()
    path = ws.root / "data" / "set.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=2)
    corrupt_column(path, "audio")
    ws.runspec("qa", "questions", {"qs": {"hf_repo": "data/set.parquet", "id_column": "id", "modality": "text",
                                          "textual_input_column": "question"}})  # audio_column keeps its default, 'audio'
    with ScriptedEndpoint(lambda seen, n: f"answer {seen.text.split()[-1]}") as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]])
        result = ws.run()
        sent = sorted(seen.text for seen in ep.requests)
    assert result.complete and result.scores[0].score == 100.0 and sent == [f"question {i}" for i in range(4)]


def test_a_hub_dataset_that_cannot_be_read_names_the_dataset_not_a_library_exception(cfg):
    folder = cfg.root / "data" / "hubstyle"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(struct_rows()), folder / "test-00000.parquet")
    corrupt_column(folder / "test-00000.parquet", "text")
    cfg.runspec("asr", "layout", {"layout_set": {"hf_repo": "data/hubstyle", "target_column": "text", "id_column": "uid"}})
    dataset = cfg.plan().catalog.datasets["layout_set"]
    with pytest.raises(UserError, match=r"^dataset 'layout_set': cannot read its rows: \S*test-00000.parquet: not a readable parquet file: "):
        list(iter_samples(dataset, streaming=True))


def split_rows():
    return [{"id": r["id"], "reference": r["reference"], "audio": r["audio"]} for r in ROWS]


@pytest.mark.parametrize("file,selectors,problem", [
    ("set.jsonl", {"split": "validation"}, "split 'validation' — set.jsonl is a single data file, which has no splits and is read whole; "
                                           "drop split, or point hf_repo at the file (or folder of split files) holding 'validation'"),
    ("train.jsonl", {"split": "validation"}, "split 'validation' — train.jsonl is a single data file"),
    ("set.jsonl", {"subset": "clean"}, "subset 'clean' names a hub configuration, but set.jsonl is a single data file, which has none; drop subset"),
    ("set.jsonl", {"revision": "main"}, "revision 'main' names a hub revision, but"),
])
def test_a_split_subset_or_revision_a_local_file_cannot_have_is_an_error(cfg, file, selectors, problem):
    cfg.jsonl(split_rows(), f"data/{file}")
    with pytest.raises(UserError, match=r"layout.json: dataset 'layout_set': " + re.escape(problem)):
        load(cfg, {"hf_repo": f"data/{file}", **selectors})


@pytest.mark.parametrize("file,split", [("set.jsonl", "test"), ("train.jsonl", "train"), ("mmau-dev-mini.jsonl", "dev")])
def test_a_single_file_is_read_whole_under_the_default_split_or_the_one_its_name_says(cfg, file, split):
    rows = cfg.copy_demo_audio(ROWS)
    assert_real_speech(load(cfg, {"hf_repo": cfg.jsonl(rows, f"data/{file}"), "split": split}))


def test_a_split_a_folder_of_split_files_lacks_is_an_error_naming_the_splits_it_has(cfg):
    folder = cfg.root / "data" / "hubstyle"
    folder.mkdir(parents=True)
    for split in ("train", "test"):
        pq.write_table(pa.Table.from_pylist(struct_rows()), folder / f"{split}-00000.parquet")
    with pytest.raises(UserError, match=r"hubstyle: dataset 'layout_set': split 'validation' not found \(have: test, train\)"):
        load(cfg, {"hf_repo": "data/hubstyle", "target_column": "text", "split": "validation"})
    assert_real_speech(load(cfg, {"hf_repo": "data/hubstyle", "target_column": "text", "split": "train"}))


def test_a_save_to_disk_folder_of_one_split_refuses_another_split_and_any_subset(cfg):
    from datasets import Audio, Dataset

    Dataset.from_list(struct_rows(), split="train").cast_column("audio", Audio(decode=False)).save_to_disk(str(cfg.root / "data" / "saved"))
    with pytest.raises(UserError, match=r"split 'validation' — this save_to_disk folder holds one dataset \(split 'train'\), read whole"):
        load(cfg, {"hf_repo": "data/saved", "target_column": "text", "split": "validation"})
    with pytest.raises(UserError, match=r"subset 'clean' names a hub configuration, but saved is a save_to_disk folder, which has none"):
        load(cfg, {"hf_repo": "data/saved", "target_column": "text", "subset": "clean"})
    assert_real_speech(load(cfg, {"hf_repo": "data/saved", "target_column": "text", "split": "train"}))


def test_an_audio_column_of_raw_bytes_is_read_as_clips(cfg):
    (cfg.root / "data").mkdir(exist_ok=True)
    rows = [{"audio": (DEMO / r["audio"]).read_bytes(), "text": r["reference"]} for r in ROWS]
    pq.write_table(pa.Table.from_pylist(rows), cfg.root / "data" / "raw.parquet")
    assert_real_speech(load(cfg, {"hf_repo": "data/raw.parquet", "target_column": "text"}))
