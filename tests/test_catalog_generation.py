"""The generated catalog: committed runspecs equal the generator's output, every peer declaration is
accounted for, names follow the protocol rule, and the extractor reads the peers' layouts."""

import json
import subprocess
import sys
import textwrap

import pytest

from lalmeval.catalog.runspecs import BUILTIN_DIR, Catalog
from scripts import extract_peers
from scripts.check_parity import parity, summary
from scripts.generate_catalog import load_inputs, outputs
from tests.support.workspace import REPO

CATALOG = Catalog.load([BUILTIN_DIR])
MAPPING, OURS, PEERS = load_inputs(REPO)


def test_committed_runspecs_and_docs_equal_the_generators_output():
    expected = outputs(REPO)
    for path, text in expected.items():
        assert (REPO / path).read_text(encoding="utf-8") == text, f"{path} is out of date: run python scripts/generate_catalog.py"
    # A runspec a user dropped into runspecs/ is theirs (README, Add a dataset); one committed must come from catalog/.
    listed = subprocess.run(["git", "ls-files", "runspecs"], cwd=REPO, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: which runspecs are committed is unknown")
    shipped = {p for p in listed.stdout.splitlines() if p.endswith(".json") and (REPO / p).is_file()}
    assert shipped == {p for p in expected if p.startswith("runspecs/")}, "a runspec the generator does not write: add it to catalog/"


def test_the_check_mode_fails_on_a_stale_file_and_names_it(tmp_path, monkeypatch, capsys):
    import shutil

    from scripts import generate_catalog

    ok = subprocess.run([sys.executable, "scripts/generate_catalog.py", "--check"], cwd=REPO, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    for folder in ("catalog", "runspecs", "docs"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    stale = tmp_path / "runspecs" / "speech_recognition" / "fleurs.json"
    stale.write_text(stale.read_text(encoding="utf-8").replace('"sw_ke"', '"sw_KE"'), encoding="utf-8")
    monkeypatch.setattr(generate_catalog, "ROOT", tmp_path)
    assert generate_catalog.main(["--check"]) == 1
    assert "out of date: runspecs/speech_recognition/fleurs.json" in capsys.readouterr().err
    assert generate_catalog.main([]) == 0 and generate_catalog.main(["--check"]) == 0  # writing brings it back


def test_lalmevals_own_entries_are_unchanged_and_keep_their_names():
    for file, entries in OURS.items():
        shipped = json.loads((BUILTIN_DIR / f"{file}.json").read_text(encoding="utf-8"))
        for name, spec in entries.items():
            assert shipped[name] == spec, name
            assert CATALOG.datasets[name].spec.reproduces is None


def test_every_peer_declaration_is_an_entry_or_a_stated_gap():
    rows = parity(CATALOG)
    assert len(rows["au_harness"]) == 399 and len(rows["lmms_v0.3"]) == 40 and len(rows["kimi"]) == 21
    for peer, found in rows.items():
        for name, verdict, detail in found:
            assert verdict in ("reproduced", "same data and metric", "differs", "not shipped", "incomplete"), (peer, name)
            assert detail, (peer, name)
    for dataset in CATALOG.datasets.values():  # and every entry that claims a declaration names a real one
        if dataset.spec.reproduces:  # (one subset of a declaration judged subset by subset: <task>/<subset>)
            peer, task = dataset.spec.reproduces.split(":")
            assert any(row[0] == task.split("/")[0] for row in rows[peer]), dataset.name
            assert "/" not in task or dataset.spec.keep_subsets == [task.split("/")[1]], dataset.name


def test_parity_reaches_the_targets_by_the_issues_definition():
    shares = {row[0]: float(row[-2].rstrip(" %")) for row in summary(parity(CATALOG))}
    assert shares["AU-Harness"] >= 85.0
    assert shares["lmms-eval v0.3.0"] >= 90.0


def test_strict_parity_asks_for_the_peers_judge_and_au_harness_meets_it():
    strict = {row[0]: float(row[-1].rstrip(" %")) for row in summary(parity(CATALOG))}
    assert strict["AU-Harness"] >= 90.0  # AU-Harness's judges all ship (its ASR names no normalizer of its own)
    verdicts = {peer: {name: (verdict, detail) for name, verdict, detail in rows} for peer, rows in parity(CATALOG).items()}
    assert verdicts["au_harness"]["noise_detection"][0] == "reproduced"  # binary and detailed judge, each with its template
    assert verdicts["kimi"]["sd-qa"][0] == verdicts["kimi"]["OpenAudioBench"][0] == verdicts["kimi"]["commoneval"][0] == "reproduced"
    assert verdicts["kimi"]["MELD"][0] == verdicts["kimi"]["mmsu"][0] == "reproduced"  # multiple choice judged by kimi_single_choice
    assert verdicts["lmms"]["voicebench_alpacaeval"][0] == verdicts["lmms"]["voicebench_wildvoice"][0] == "reproduced"  # lmms_voicebench_open


def test_peer_entries_name_the_peers_judge_for_each_judge_metric():
    def spec(name):
        return CATALOG.datasets[name].spec

    assert spec("noise_detection").judge_template == {"llm_judge_binary": "au_harness_binary_json", "llm_judge_detailed": "au_harness_detailed_json"}
    assert spec("big_bench_audio_audio_query").judge_template == "au_harness_big_bench_audio"
    assert spec("big_bench_audio_audio_query").transcript_column == "transcript"  # its judge sees (transcript, answer)
    assert spec("wavcaps").judge_template == spec("wavcaps@lmms_v0.3").judge_template == "audiobench_wavcaps"
    assert (spec("alpaca_audio").judge_template, spec("alpaca_audio").transcript_column) == ("audiobench", "speech_instruction")
    assert spec("mix_evals_audio2text_freeform").judge_template == spec("mix_evals_audio2text_freeform@lmms_v0.3").judge_template == "mixeval_freeform"
    assert spec("step2_audio_paralinguistic_age").judge_template == "lmms_step2_age"  # semantic_match, the prompt of its subset
    assert (spec("sd-qa@kimi").judge_template, spec("commoneval@kimi").judge_template, spec("ClothoAQA@kimi").judge_template) == \
        ("kimi_sd_qa", "kimi_open_qa", "kimi_yes_no")
    assert spec("MELD@kimi").judge_template == spec("TUT2017@kimi").judge_template == "kimi_single_choice"
    assert (spec("voicebench_sd-qa_usa").judge_template, spec("voicebench_commoneval@lmms").judge_template) == \
        ("lmms_voicebench_sd_qa", "lmms_voicebench_open")
    subsets = {d.spec.keep_subsets[0]: d.spec.judge_template for d in CATALOG.resolve("OpenAudioBench@kimi")}
    assert subsets == {s: f"kimi_openaudiobench_{s}" for s in ("alpaca_eval", "llama_questions", "reasoning_qa", "trivia_qa", "web_questions")}
    assert all(d.spec.reproduces == f"kimi:OpenAudioBench/{d.spec.keep_subsets[0]}" for d in CATALOG.resolve("OpenAudioBench@kimi"))


def test_a_peer_judge_not_shipped_yet_is_stood_in_for_and_the_entry_says_so():
    from collections import OrderedDict

    from scripts.generate_catalog import Entry, _apply_metric, _judge_templates

    entry = Entry("x", "kimi", "f", OrderedDict())
    _apply_metric(entry, "mqa", {"metrics": ["llm_judge_binary"], "judge_template": "kimi_not_shipped", "stand_in": "kimi_yes_no"})
    _judge_templates(entry)
    assert entry.spec["judge_template"] == "kimi_yes_no"
    assert entry.differs == ["metric mqa: the peer's judge prompt (kimi_not_shipped) is not available here; kimi_yes_no stands in"]
    bare = Entry("y", "kimi", "f", OrderedDict())
    _apply_metric(bare, "mqa", {"metrics": ["llm_judge_binary"], "judge_template": "kimi_not_shipped"})
    _judge_templates(bare)
    assert "judge_template" not in bare.spec and bare.differs[0].endswith("lalmeval's default prompt is used")


def test_a_peer_takes_its_own_name_unless_a_different_definition_holds_it():
    def reproduces(name):
        return CATALOG.datasets[name].spec.reproduces

    assert reproduces("librispeech_test_clean") is None                       # ours keeps the name
    assert reproduces("librispeech_test_clean@au_harness") == "au_harness:librispeech_test_clean"
    assert reproduces("librispeech_test_clean@lmms") == "lmms:librispeech_test_clean"
    assert reproduces("librispeech_test_clean@lmms_v0.3") == "lmms_v0.3:librispeech_test_clean"
    assert reproduces("fleurs_as_in") == "au_harness:fleurs_as_in"            # nobody else defines it
    assert reproduces("voxpopuli_de") == "au_harness:voxpopuli_de" and reproduces("voxpopuli_de@lmms") == "lmms:voxpopuli_de"
    assert reproduces("LibriSpeech@kimi") == "kimi:LibriSpeech"


def test_a_fleurs_locale_is_declared_as_au_harness_declares_it():
    spec = CATALOG.datasets["fleurs_sw_ke"].spec
    assert (spec.hf_repo, spec.subset, spec.split, spec.audio_column, spec.target_column) == ("google/fleurs", "sw_ke", "test", "audio", "transcription")
    assert spec.metrics == ["word_error_rate"] and spec.long_audio == "chunk" and spec.language == "sw"
    assert spec.generation_kwargs.temperature == 0.0001 and spec.generation_kwargs.max_tokens == 64
    assert spec.prompt_template.startswith("Please transcribe the given speech.")
    ours = CATALOG.datasets["fleurs_en_us"].spec  # ours reads the cased, punctuated raw_transcription: both ship
    assert ours.target_column == "raw_transcription" and CATALOG.datasets["fleurs_en_us@au_harness"].spec.target_column == "transcription"


def test_peer_groups_resolve_to_that_peers_entries():
    chat = [d.name for d in CATALOG.resolve("air_bench_chat@lmms_v0.3")]
    assert chat == ["air_bench_chat_sound@lmms_v0.3", "air_bench_chat_music@lmms_v0.3", "air_bench_chat_speech@lmms_v0.3", "air_bench_chat_mixed@lmms_v0.3"]
    fleurs = CATALOG.groups["fleurs@au_harness"]
    assert fleurs.spec.aggregation == "mean" and len(CATALOG.members("fleurs@au_harness")) == 102
    assert len(CATALOG.members("speech_recognition@au_harness")) > 240


# --- the extractor's own parsing, on small files in the peers' layouts ------------------------


class FakeMirror:
    """Files of a peer repository held in memory (the extractor reads only these calls)."""

    def __init__(self, files):
        self.files_ = {k: textwrap.dedent(v) for k, v in files.items()}
        self.commit = "0" * 40
        self.ref = "HEAD"

    def files(self, prefix):
        return sorted(f for f in self.files_ if f.startswith(prefix))

    def exists(self, path):
        return path in self.files_

    def read(self, path):
        return self.files_[path]


def test_au_tasks_inherit_their_base_files_and_the_leaf_wins():
    mirror = FakeMirror({
        "tasks/asr/base.yaml": "split: test\nmetrics:\n  - metric: word_error_rate\ngeneration_kwargs:\n  temperature: 0.1\n  max_completion_tokens: 64\n",
        "tasks/asr/fleurs/base.yaml": 'extends: ["../base.yaml#"]\ndataset_path: google/fleurs\ntarget_column: transcription\n',
        "tasks/asr/fleurs/fleurs_xx.yaml": 'task_name: fleurs_xx\nextends: ["./base.yaml#"]\nsubset: xx\ngeneration_kwargs:\n  temperature: 0.5\n',
    })
    facts = extract_peers.au_tasks(mirror)
    [task] = facts["tasks"]
    assert task["name"] == "fleurs_xx" and task["groups"] == ["asr", "fleurs"]
    assert task["config"] == {"split": "test", "metrics": ["word_error_rate"], "generation_kwargs": {"temperature": 0.5, "max_completion_tokens": 64},
                              "dataset_path": "google/fleurs", "target_column": "transcription", "subset": "xx"}
    assert facts["groups"] == {"asr": ["fleurs_xx"], "fleurs": ["fleurs_xx"]}


def test_lmms_tasks_are_found_by_their_audio_function_and_its_columns_are_read():
    mirror = FakeMirror({
        "lmms_eval/tasks/cv/_default_template_yaml": "dataset_path: org/cv\ndoc_to_target: gt\n",
        "lmms_eval/tasks/cv/cv_en.yaml": "task: cv_en\ninclude: _default_template_yaml\ndataset_name: en\ntest_split: test\n"
                                         "doc_to_visual: !function utils.cv_doc_to_audio\ndoc_to_text: !function utils.cv_doc_to_text\n"
                                         "metric_list:\n  - metric: wer\n",
        "lmms_eval/tasks/cv/cv.yaml": "group: cv\ntask:\n  - cv_en\n",
        "lmms_eval/tasks/cv/utils.py": 'def cv_doc_to_audio(doc):\n    return [doc["clip"]]\n\n'
                                       'def cv_doc_to_text(doc, kwargs):\n    return f"{kwargs[\'pre_prompt\']}Transcribe this clip please:{kwargs[\'post_prompt\']}"\n',
        "lmms_eval/tasks/img/img.yaml": "task: img\ndataset_path: org/img\ndoc_to_visual: !function utils.img_doc_to_visual\n",
    })
    facts = extract_peers.lmms_tasks(mirror)
    [task] = facts["tasks"]
    assert (task["name"], task["config"]["dataset_path"], task["config"]["doc_to_target"]) == ("cv_en", "org/cv", "gt")
    assert task["functions"]["doc_to_visual"]["columns"] == ["clip"]
    assert "Transcribe this clip please:" in task["functions"]["doc_to_text"]["strings"]
    assert facts["groups"]["cv"]["members"] == ["cv_en"]


def test_kimi_datasets_come_with_their_kind_language_and_downloader_sources():
    mirror = FakeMirror({
        "almeval/datasets/ds_asr.py": "class ASRDataset(Base):\n    TASK = 'ASR'\n\nclass Fleurs_zh(ASRDataset):\n    DATASET_NAME = 'Fleurs-zh'\n    LANG = 'zh'\n    DATASET_SERIES = 'Fleurs'\n",
        "data/download_benchmark.py": 'class FleursDownloader(D):\n    def download(self):\n        q = {"question": "请将这段语音转写成文字。"}\n        load_dataset("google/fleurs", "cmn_hans_cn")\n\nDATASET_REGISTRY = {"Fleurs": FleursDownloader}\n',
    })
    [dataset] = extract_peers.kimi_datasets(mirror)["datasets"]
    assert (dataset["name"], dataset["kind"], dataset["language"], dataset["series"]) == ("Fleurs-zh", "asr", "zh", "Fleurs")
    assert dataset["downloader"]["load_dataset"] == [["google/fleurs", "cmn_hans_cn"]]
    assert dataset["downloader"]["questions"] == ["请将这段语音转写成文字。"]


@pytest.mark.skipif(not (extract_peers.Path("/work/.mirror") / extract_peers.KIMI / "repo").is_dir(), reason="the peers' mirrors are not on this machine")
def test_the_committed_kimi_facts_are_what_the_extractor_reads_from_the_mirror():
    mirror = extract_peers.Mirror(extract_peers.Path("/work/.mirror") / extract_peers.KIMI / "repo")
    assert extract_peers.kimi_datasets(mirror) == PEERS["kimi"]
