"""The built-in catalog: every entry is complete and consistent, and every data layout it uses loads.

Layout tests take a shipped entry exactly as written, point a copy of it (only hf_repo replaced) at
a few rows written here in the real dataset's layout — a hub-style folder of parquet or csv files
with its README config table, a save_to_disk folder, a jsonl, a CallHome folder — and read them
through the real loader.
"""

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from lalmeval.catalog.runspecs import BUILTIN_DIR, Catalog, Dataset
from lalmeval.config.languages import NAMES
from lalmeval.config.schema import Filters
from lalmeval.data.choices import normalize_text
from lalmeval.data.messages import Audio, Text
from lalmeval.data.source import open_source
from lalmeval.metrics.base import METRICS
from lalmeval.preprocess.general import GeneralPreprocessor
from tests.support.hubcache import cached_repo, use_cache
from tests.support.workspace import DEMO, REPO, demo_rows

CATALOG = Catalog.load([BUILTIN_DIR])
OWN = {n: d for n, d in CATALOG.datasets.items() if d.spec.reproduces is None}  # lalmeval's own entries (the rest reproduce a peer's)
CATEGORIES = {"speech_recognition", "paralinguistics", "spoken_language_understanding", "spoken_language_reasoning",
              "audio_understanding", "text_knowledge", "callhome", "text_to_speech"}
# The multiple-choice benchmarks: each must carry its options and a gold answer.
MULTIPLE_CHOICE = {"mmau_test_mini", "mmau_test_mini_local", "mmsu", "vocalsound_test", "vocalsound_val", "meld_emotion_mc",
                   "air_bench_foundation_sound", "air_bench_foundation_music", "air_bench_foundation_speech", "muchomusic_test",
                   "mmlu_all", "tmmluplus_basic_medical_science", "tw_legal_benchmark_v1", "tut2017_eval", "cochlscene_test_val"}
CALLHOME_LANGUAGES = {"eng": "en", "deu": "de", "jpn": "ja", "spa": "es", "zho": "zh"}
CLIPS = [DEMO / row["audio"] for row in demo_rows(4)]


# --- the catalog as shipped ------------------------------------------------------------------


def test_the_builtin_catalog_holds_at_least_80_datasets_in_its_eight_categories():
    assert len(OWN) >= 80
    assert {d.category for d in OWN.values()} == CATEGORIES
    assert {d.category for d in CATALOG.datasets.values()} == CATEGORIES | {"safety"}  # AU-Harness's safety tasks


def test_every_entry_says_where_it_comes_from():
    for dataset in CATALOG.datasets.values():
        origin, repo = dataset.spec.origin or "", dataset.spec.hf_repo
        assert "paper" in origin or "corpus" in origin, dataset.name
        if repo.startswith("."):  # local data: the origin says how the folder under private_datasets/ is filled
            local = dataset.resolve_path(repo).relative_to(REPO)
            assert local.parts[0] == "private_datasets" and "/".join(local.parts[:2]) in origin, dataset.name
        else:
            assert f"https://huggingface.co/datasets/{repo}" in origin, dataset.name


def test_every_language_is_a_known_one():
    known = set(NAMES.values())
    for dataset in OWN.values():
        assert dataset.iso_language in known and dataset.iso_target_language in known, dataset.name
    # A peer's locale families (Common Voice, FLEURS) name languages by ISO 639 code, beyond the English names lalmeval knows.
    for dataset in CATALOG.datasets.values():
        assert re.fullmatch(r"[a-z]{2,3}", dataset.iso_language) and re.fullmatch(r"[a-z]{2,3}", dataset.iso_target_language), dataset.name


def test_every_entry_lists_registered_metrics():
    for dataset in CATALOG.datasets.values():
        assert dataset.spec.metrics, dataset.name
        for metric in dataset.spec.metrics:
            METRICS.get(metric)


def test_multiple_choice_entries_name_their_options_and_a_gold_answer():
    options_given = {n for n, d in OWN.items() if d.spec.choices or d.spec.choices_column}
    assert MULTIPLE_CHOICE == options_given
    for dataset in CATALOG.datasets.values():  # a peer's multiple-choice entry: a gold answer and a metric (accuracy, or the peer's judge)
        if dataset.spec.choices or dataset.spec.choices_column:
            assert dataset.spec.target_column and dataset.spec.metrics, dataset.name
    for name in MULTIPLE_CHOICE:
        spec = CATALOG.datasets[name].spec
        assert spec.target_column and "accuracy" in spec.metrics, name
        if spec.choices:  # fixed labels must stay distinguishable after gold_index's normalization
            assert len({normalize_text(c) for c in spec.choices}) == len(spec.choices), name


def test_callhome_names_resolve_to_local_folders_in_five_languages():
    assert len([d for d in CATALOG.resolve("callhome") if d.name in OWN]) == 10
    assert len(CATALOG.resolve("callhome")) == 20  # and AU-Harness's callhome_asr_* / callhome_diarization_* on the same folders
    for code, language in CALLHOME_LANGUAGES.items():
        utterances, turns = CATALOG.resolve(f"callhome_{code}")[0], CATALOG.resolve(f"callhome_{code}_turns")[0]
        for dataset in (utterances, turns):
            assert dataset.spec.format == "callhome" and dataset.iso_language == language
            assert dataset.resolve_path(dataset.spec.hf_repo) == REPO / "private_datasets" / "callhome" / code
        assert utterances.spec.segment == "utterance" and utterances.spec.metrics == ["word_error_rate"]
        assert turns.spec.segment == "turns" and {"speaker_diarization", "llm_judge_binary"} <= set(turns.spec.metrics)


# --- stand-ins: the real entries on a few rows of their own layout ----------------------------


def standin(tmp_path: Path, name: str, data: Path) -> Dataset:
    """The built-in entry `name`, every field as shipped but hf_repo, declared in a runspec of its own."""
    real = CATALOG.datasets[name]
    raw = json.loads(real.source.read_text(encoding="utf-8"))[name]
    folder = tmp_path / "runspecs" / name / real.category
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{real.task_type}.json").write_text(json.dumps({name: {**raw, "hf_repo": str(data)}}), encoding="utf-8")
    copy = Catalog.load([folder.parent]).datasets[name]
    assert copy.spec.model_dump(exclude={"hf_repo"}) == real.spec.model_dump(exclude={"hf_repo"})
    return copy


def samples(tmp_path: Path, name: str, data: Path) -> list:
    return list(open_source(standin(tmp_path, name, data), Filters()).samples())


def clip(index: int) -> dict:
    return {"bytes": CLIPS[index].read_bytes(), "path": CLIPS[index].name}


def hub_folder(root: Path, tables: dict, casts: dict | None = None, features=None) -> Path:
    """A folder laid out like a hub repo: <config>/<split>-00000-of-00001.parquet, and the README table of configs.

    Audio columns are stored as the hub stores them, as Audio features (by default 'audio' and 'context')."""
    from datasets import Audio
    from datasets import Dataset as HFDataset

    casts = {"audio": Audio(), "context": Audio()} if casts is None else casts
    configs: dict[str, list[str]] = {}
    for (config, split), rows in tables.items():
        table = HFDataset.from_list(rows, features=features)
        for column, feature in casts.items():
            if column in table.column_names:
                table = table.cast_column(column, feature)
        (root / config).mkdir(parents=True, exist_ok=True)
        table.to_parquet(str(root / config / f"{split}-00000-of-00001.parquet"))
        configs.setdefault(config, []).append(split)
    return readme(root, {c: [(s, f"{c}/{s}-*") for s in splits] for c, splits in configs.items()})


def readme(root: Path, configs: dict) -> Path:
    """The README.md of a hub repo, reduced to its table of configs: config → [(split, file pattern)]."""
    lines = ["---", "configs:"]
    for config, files in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        lines += [line for split, pattern in files for line in (f"  - split: {split}", f"    path: {pattern}")]
    (root / "README.md").write_text("\n".join(lines + ["---", ""]), encoding="utf-8")
    return root


def test_hub_audio_with_a_transcript_in_a_named_config(tmp_path):
    rows = [{"audio": clip(i), "sentence": f"sentence {i}", "path": f"common_voice_en_{i}.mp3", "locale": "en"} for i in range(2)]
    other = [{"audio": clip(2), "sentence": "une phrase", "path": "common_voice_fr_0.mp3", "locale": "fr"}]
    got = samples(tmp_path, "common_voice_15_en", hub_folder(tmp_path / "cv", {("en", "test"): rows, ("fr", "test"): other}))
    assert [(s.id, s.reference) for s in got] == [("common_voice_en_0.mp3", "sentence 0"), ("common_voice_en_1.mp3", "sentence 1")]
    assert [s.audio[0].source for s in got] == [CLIPS[0].read_bytes(), CLIPS[1].read_bytes()]


def test_hub_audio_in_splits_named_after_the_test_sets(tmp_path):
    def rows(prefix):
        return [{"sid": f"{prefix}_{i}", "text": f"文本{i}", "begin_time": 0.0, "end_time": 1.0, "subsets": "{}", "WavPath": "x.wav", "audio": clip(i)}
                for i in range(2)]

    folder = hub_folder(tmp_path / "wenet", {("default", "test_net"): rows("net"), ("default", "test_meeting"): rows("meeting")})
    got = samples(tmp_path, "wenetspeech_test_meeting", folder)
    assert [(s.id, s.reference) for s in got] == [("meeting_0", "文本0"), ("meeting_1", "文本1")]


def test_fleurs_reads_the_hub_parquet_export_at_its_revision(tmp_path, monkeypatch):
    """The entry names revision refs/convert/parquet (the repository's loading script no longer runs):
    its configuration's files are read from the export as the hub cache holds it — at main, nothing."""
    rows = [{"id": 1, "audio": clip(0), "transcription": "hello", "raw_transcription": "Hello.", "language": "English"}]
    cache = use_cache(monkeypatch, tmp_path / "hub-cache")
    export = hub_folder(tmp_path / "export", {("en_us", "test"): rows, ("fr_fr", "test"): rows})
    (export / "README.md").unlink()  # the export has no card: its folders are its configurations
    (export / "en_us" / "test").mkdir()
    (export / "en_us" / "test-00000-of-00001.parquet").rename(export / "en_us" / "test" / "0000.parquet")
    cached_repo(cache, "google/fleurs", export, "refs/convert/parquet")
    got = list(open_source(CATALOG.datasets["fleurs_en_us"], Filters()).samples())
    assert [s.reference for s in got] == ["Hello."] and got[0].audio[0].source == CLIPS[0].read_bytes()


def test_audiobench_context_instruction_answer_from_a_save_to_disk_folder(tmp_path):
    from datasets import Audio, DatasetDict
    from datasets import Dataset as HFDataset

    rows = [{"context": clip(i), "instruction": f"Which accent, {i}?", "answer": f"The speaker sounds {i}."} for i in range(2)]
    saved = tmp_path / "voxceleb_accent"
    DatasetDict(test=HFDataset.from_list(rows).cast_column("context", Audio())).save_to_disk(str(saved))
    got = samples(tmp_path, "voxceleb_accent_test", saved)
    assert [(s.instruction, s.reference) for s in got] == [(r["instruction"], r["answer"]) for r in rows]
    assert got[0].audio[0].source == CLIPS[0].read_bytes()


def test_voicebench_letter_gold_with_spoken_options_sends_no_text(tmp_path):
    prompt = "Which organ pumps blood?\nA. lungs\nB. heart\nC. liver\nD. skin\nSelect one of A, B, C, D."
    rows = [{"audio": clip(0), "prompt": prompt, "reference": "B", "question_id": 7, "category": "biology", "src": "ori_mmlu"}]
    dataset = standin(tmp_path, "voicebench_mmsu_biology", hub_folder(tmp_path / "vb", {("mmsu", "biology"): rows}))
    sample = next(open_source(dataset, Filters()).samples())
    assert (sample.reference, sample.choices, sample.transcript) == ("B", (), prompt)
    assert GeneralPreprocessor(dataset).prompt(sample).text == ""  # the options stay spoken


def test_options_list_with_the_gold_as_option_text(tmp_path):
    rows = [{"context": clip(0), "instruction": "What plays?", "choices": ["Piano", "Violin", "Drums", "Flute"], "answer": "Drums",
             "other_attributes": {"id": "q1", "task": "music", "difficulty": "easy"}}]
    got = samples(tmp_path, "mmau_test_mini", hub_folder(tmp_path / "mmau", {("MMAU-mini", "test"): rows}))
    assert (got[0].choices, got[0].gold, got[0].instruction) == (("Piano", "Violin", "Drums", "Flute"), 2, "What plays?")


def air_bench_rows(kind):
    if kind == "Chat":
        return [{"uniq_id": 10, "audio": clip(0), "question": "Describe it.", "answer_gt": "A dog barks twice.", "meta_info": "dog barking",
                 "task_name": "sound_QA", "dataset_name": "clotho", "path": "a.wav"}]
    return [{"uniq_id": 1, "audio": clip(0), "question": "What sound?", "choice_a": "rain", "choice_b": "dog", "choice_c": "car", "choice_d": "bell",
             "answer_gt": "dog", "task_name": "Audio_Grounding", "dataset_name": "AudioSet", "path": "a.wav"},
            {"uniq_id": 2, "audio": clip(1), "question": "Is it loud?", "choice_a": "yes", "choice_b": "no", "choice_c": None, "choice_d": None,
             "answer_gt": "no", "task_name": "Sound_Loudness", "dataset_name": "AudioSet", "path": "b.wav"}]


def test_option_columns_some_empty_with_the_gold_as_option_text(tmp_path):
    folder = hub_folder(tmp_path / "air", {("Foundation", "sound"): air_bench_rows("Foundation"), ("Chat", "sound"): air_bench_rows("Chat")})
    foundation = samples(tmp_path, "air_bench_foundation_sound", folder)
    assert [(s.id, s.choices, s.gold, s.subset) for s in foundation] == [
        ("1", ("rain", "dog", "car", "bell"), 1, "Audio_Grounding"), ("2", ("yes", "no"), 1, "Sound_Loudness")]
    chat = samples(tmp_path, "air_bench_chat_sound", folder)[0]
    assert (chat.instruction, chat.reference, chat.transcript, chat.choices) == ("Describe it.", "A dog barks twice.", "dog barking", ())


def test_mmsu_option_columns_in_its_single_split(tmp_path):
    rows = [{"id": "mmsu_1", "audio": clip(0), "question": "Which word is stressed?", "choice_a": "I", "choice_b": "never",
             "choice_c": "said", "choice_d": "that", "answer_gt": "said", "task_name": "word_stress", "category": "perception"}]
    got = samples(tmp_path, "mmsu", hub_folder(tmp_path / "mmsu", {("default", "train"): rows}))
    assert [(s.id, s.gold, s.subset, s.instruction) for s in got] == [("mmsu_1", 2, "word_stress", "Which word is stressed?")]


def test_fixed_choices_with_the_gold_as_a_label(tmp_path):
    labels = ["Throat clearing", "Laughter", "Sniff"]
    rows = [{"audio": clip(i), "spk_id": f"f{i}", "answer": label, "age_group": i + 1} for i, label in enumerate(labels)]
    dataset = standin(tmp_path, "vocalsound_test", hub_folder(tmp_path / "vs", {("default", "test"): rows}))
    got = list(open_source(dataset, Filters()).samples())
    assert [got_one.choices[got_one.gold] for got_one in got] == labels and [s.subset for s in got] == ["1", "2", "3"]
    text = GeneralPreprocessor(dataset).prompt(got[0]).text
    assert "Which human vocal sound is in the audio?" in text and "D. Throat clearing" in text


def test_labelled_option_string_with_a_labelled_gold(tmp_path):
    rows = [{"context": clip(0), "instruction": "Which instrument leads?", "choices": "(A) guitar (B) trumpet (C) organ (D) harp",
             "answer": "(C) organ"}]
    got = samples(tmp_path, "muchomusic_test", hub_folder(tmp_path / "mucho", {("default", "test"): rows}))
    assert (got[0].choices, got[0].gold) == (("guitar", "trumpet", "organ", "harp"), 2)


def test_index_gold_from_a_class_label(tmp_path):
    from datasets import ClassLabel, Features, Sequence, Value

    features = Features({"question": Value("string"), "subject": Value("string"), "choices": Sequence(Value("string")),
                         "answer": ClassLabel(names=["A", "B", "C", "D"])})
    rows = [{"question": "2 + 2 = ?", "subject": "elementary_mathematics", "choices": ["3", "4", "5", "22"], "answer": 1}]
    got = samples(tmp_path, "mmlu_all", hub_folder(tmp_path / "mmlu", {("all", "test"): rows}, features=features))
    assert (got[0].choices, got[0].gold, got[0].text_input, got[0].subset, got[0].audio) == (("3", "4", "5", "22"), 1, "2 + 2 = ?", "elementary_mathematics", ())


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


TWINKLE = [{"question": "下列何者為心臟的功能？", "A": "消化", "B": "呼吸", "C": "輸送血液", "D": "排汗", "answer": "C"},
           {"question": "民法規定成年年齡為？", "A": "十六歲", "B": "十八歲", "C": "二十歲", "D": "二十一歲", "answer": "B"}]


def test_twinkle_csv_in_a_subject_config(tmp_path):
    folder = tmp_path / "tmmluplus"
    write_csv(folder / "data" / "basic_medical_science_test.csv", TWINKLE[:1])
    write_csv(folder / "data" / "basic_medical_science_train.csv", TWINKLE[1:])
    readme(folder, {"basic_medical_science": [("train", "data/basic_medical_science_train.csv"), ("test", "data/basic_medical_science_test.csv")]})
    got = samples(tmp_path, "tmmluplus_basic_medical_science", folder)
    assert [(s.text_input, s.choices, s.gold, s.audio) for s in got] == [(TWINKLE[0]["question"], ("消化", "呼吸", "輸送血液", "排汗"), 2, ())]


def test_twinkle_csv_alone_in_a_repo_is_its_train_split(tmp_path):
    write_csv(tmp_path / "tw_legal" / "benchmark.csv", TWINKLE)
    got = samples(tmp_path, "tw_legal_benchmark_v1", tmp_path / "tw_legal")
    assert [s.gold for s in got] == [2, 1]


def kimi_clips(tmp_path: Path) -> list[str]:
    folder = tmp_path / "kimi_audio"
    folder.mkdir(exist_ok=True)
    return [str(shutil.copy(path, folder / path.name)) for path in CLIPS]


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def test_kimi_jsonl_transcripts_with_row_instructions_and_subsets(tmp_path):
    paths = kimi_clips(tmp_path)
    rows = [{"index": i, "audio_path": paths[i], "question": "请把这段语音转录成文本。", "answer": f"句子{i}", "subset": "aishell2_test",
             "task_type": "understanding"} for i in range(2)]
    got = samples(tmp_path, "aishell_2_ios_test", jsonl(tmp_path / "AISHELL-2.jsonl", rows))
    assert [(s.id, s.reference, s.instruction, s.subset) for s in got] == [(str(i), f"句子{i}", "请把这段语音转录成文本。", "aishell2_test") for i in range(2)]
    assert [s.audio[0].source for s in got] == paths[:2]


def test_kimi_jsonl_spoken_questions_with_audio_path_lists_and_subsets(tmp_path):
    paths = kimi_clips(tmp_path)
    rows = [{"index": 0, "audio_path": paths[0], "subset": "llama_questions", "question": "", "audio_content": "Who wrote Hamlet?",
             "answer": "Shakespeare", "task_type": "audio2text"},
            {"index": 1, "audio_path": paths[1:3], "subset": "trivia_qa", "question": "", "audio_content": "Largest planet?",
             "answer": "['jupiter', 'planet jupiter']", "task_type": "audio2text"}]
    dataset = standin(tmp_path, "openaudiobench", jsonl(tmp_path / "OpenAudioBench.jsonl", rows))
    got = list(open_source(dataset, Filters()).samples())
    assert [(s.subset, s.transcript, s.reference) for s in got] == [(r["subset"], r["audio_content"], r["answer"]) for r in rows]
    assert [[a.source for a in s.audio] for s in got] == [paths[:1], paths[1:3]]
    assert GeneralPreprocessor(dataset).prompt(got[1]).text == ""  # the question is spoken, never written


def test_kimi_jsonl_labels_become_fixed_choices_shown_once(tmp_path):
    paths = kimi_clips(tmp_path)
    question = "Identify the predominant emotion in this speech.\nOptions:\n(A) neutral\n(B) joy\n..."
    rows = [{"index": "0", "audio_path": paths[0], "question": question, "answer": "joy", "subset": "emotion", "utterance": "Oh my god!"},
            {"index": "1", "audio_path": paths[1], "question": question, "answer": "disgust", "subset": "emotion", "utterance": "Ew."}]
    dataset = standin(tmp_path, "meld_emotion_mc", jsonl(tmp_path / "MELD.jsonl", rows))
    got = list(open_source(dataset, Filters()).samples())
    assert [(s.gold, s.transcript, s.instruction) for s in got] == [(1, "Oh my god!", None), (6, "Ew.", None)]
    text = GeneralPreprocessor(dataset).prompt(got[0]).text
    assert text.count("neutral") == 1 and "A. neutral" in text and "G. disgust" in text


@pytest.mark.parametrize("name,answers,golds", [
    ("tut2017_eval", ["cafe/restaurant", "city_center", "residential_area"], [2, 4, 12]),
    ("cochlscene_test_val", ["CrowdedIndoor", "SubwayStation", "Bus"], [3, 12, 0]),
])
def test_kimi_scene_labels_match_their_fixed_choices(tmp_path, name, answers, golds):
    paths = kimi_clips(tmp_path)
    rows = [{"index": i, "audio_path": paths[i], "question": "Identify the acoustic scene in the audio.\nOptions: ...", "answer": answer,
             "subset": "Test", "task_type": "understanding"} for i, answer in enumerate(answers)]
    assert [s.gold for s in samples(tmp_path, name, jsonl(tmp_path / "scenes.jsonl", rows))] == golds


def test_kimi_jsonl_options_list_reports_each_task(tmp_path):
    paths = kimi_clips(tmp_path)
    rows = [{"index": 0, "question": "Which animal?\n(A) cat (B) dog", "audio_path": paths[0], "choices": ["cat", "dog"], "answer": "dog",
             "dataset": "mmau", "subset": "sound", "task_type": "understanding", "difficulty": "easy", "category": "x", "sub-category": "y"}]
    got = samples(tmp_path, "mmau_test_mini_local", jsonl(tmp_path / "mmau-test-mini.jsonl", rows))
    assert [(s.choices, s.gold, s.subset, s.instruction) for s in got] == [(("cat", "dog"), 1, "sound", rows[0]["question"])]


def mt_bench_rows():
    return [{"question_id": 81, "category": "writing", "turns": ["Plan a trip.", "Now make it shorter."], "reference": [],
             "lang": "en", "audio": [clip(0), clip(1)]},
            {"question_id": 111, "category": "math", "turns": ["What is 3 + 4?", "And times 2?"], "reference": ["7", "14"],
             "lang": "en", "audio": [clip(2), clip(3)]}]


def test_mt_bench_turns_each_with_their_own_clip(tmp_path):
    folder = hub_folder(tmp_path / "mt", {("default", "test"): mt_bench_rows()}, casts={})  # clips as plain {bytes, path} structs
    dataset = standin(tmp_path, "mtbench_audio", folder)
    got = list(open_source(dataset, Filters()).samples())
    assert [(s.id, s.subset, s.turns) for s in got] == [("81", "writing", ("Plan a trip.", "Now make it shorter.")),
                                                        ("111", "math", ("What is 3 + 4?", "And times 2?"))]
    assert [a.source for a in got[1].audio] == [CLIPS[2].read_bytes(), CLIPS[3].read_bytes()]
    assert json.loads(got[1].reference) == ["7", "14"]
    prompt = GeneralPreprocessor(dataset).prompt(got[1])
    assert prompt.conversation.turns[0].parts == (Text("What is 3 + 4?"), Audio(0)) and prompt.followups == ((Text("And times 2?"), Audio(1)),)
    text_only = standin(tmp_path, "mtbench_text", folder)
    assert [s.audio for s in open_source(text_only, Filters()).samples()] == [(), ()]


def test_mt_bench_with_its_list_of_audio_features_loads(tmp_path):
    from datasets import Audio, List, load_dataset

    folder = hub_folder(tmp_path / "mt", {("default", "test"): mt_bench_rows()}, casts={"audio": List(Audio())})
    (folder / "README.md").unlink()  # without a config table the parquet's own features hold, as the card declares them
    assert str(load_dataset(str(folder), split="test").features["audio"]).startswith("List(Audio(")
    got = samples(tmp_path, "mtbench_audio", folder)
    assert [len(s.audio) for s in got] == [2, 2]


def test_big_bench_audio_and_its_text_only_control(tmp_path):
    rows = [{"id": "bba_1", "audio": clip(0), "category": "formal_fallacies", "official_answer": "valid", "transcript": "Is the argument valid?"}]
    folder = hub_folder(tmp_path / "bba", {("default", "train"): rows})
    spoken, written = samples(tmp_path, "big_bench_audio", folder)[0], samples(tmp_path, "big_bench_audio_text", folder)[0]
    assert (spoken.reference, spoken.subset, len(spoken.audio)) == ("valid", "formal_fallacies", 1)
    assert (written.text_input, written.audio) == ("Is the argument valid?", ())


def test_clotho_aqa_sends_its_question_after_the_single_word_instruction(tmp_path):
    rows = [{"audio": clip(0), "question": "Is it raining?", "answer": "yes", "file_name": "rain.wav"}]
    dataset = standin(tmp_path, "clotho_aqa_test", hub_folder(tmp_path / "clotho", {("clotho_aqa", "clotho_aqa_test_filtered"): rows}))
    sample = next(open_source(dataset, Filters()).samples())
    assert sample.reference == "yes" and sample.choices == ()
    assert GeneralPreprocessor(dataset).prompt(sample).text == "Answer the question using a single word only.\nIs it raining?"


def test_callhome_entries_read_a_callhome_folder(tmp_path):
    fixture = Path(__file__).resolve().parent / "fixtures" / "callhome"
    folder = Path(shutil.copytree(fixture, tmp_path / "callhome" / "eng", ignore=shutil.ignore_patterns("*.py", "*.json")))
    utterances = samples(tmp_path, "callhome_eng", folder)
    assert (utterances[0].id, utterances[0].reference) == ("5001_0000", "hello is that you Maria")
    assert utterances[0].audio[0].source == str(folder / "audio" / "5001.wav") and utterances[0].audio[0].span is not None
    windows = samples(tmp_path, "callhome_eng_turns", folder)
    assert windows[0].id == "5001_w000" and windows[0].reference.splitlines()[0].startswith(("A: ", "B: "))
    assert all(s.audio[0].span[1] - s.audio[0].span[0] <= 30.0 for s in windows if "\n" in s.reference)


def test_the_catalog_page_lists_every_builtin_dataset_and_the_readme_their_count():
    page = (REPO / "docs" / "catalog.md").read_text(encoding="utf-8")
    cells = [line.split("|")[2].strip() for line in page.splitlines() if line.startswith("| ") and line.count("|") == 7]
    rows = {cell.strip("`") for cell in cells if cell.startswith("`")}   # a dataset's name; other tables' rows are no names
    assert rows == set(CATALOG.datasets)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"**Built in:** {len(CATALOG.datasets)} datasets" in readme
