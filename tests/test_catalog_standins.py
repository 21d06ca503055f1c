"""Generated peer entries end to end: each shipped entry, only its data pointed at a few rows in the
hub dataset's (or the peer's export's) own layout, run against a scripted model."""

import json
import shutil

import pytest

from lalmeval.runspecs import BUILTIN_DIR, Catalog
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import DEMO, demo_rows, model
from tests.test_catalog import clip, hub_folder

CATALOG = Catalog.load([BUILTIN_DIR])
ROWS = demo_rows(2)


def shipped(ws, name, data):
    """Entry `name` exactly as shipped (hf_repo replaced) in the workspace's runspecs, as 'standin'."""
    raw = json.loads(CATALOG.datasets[name].source.read_text(encoding="utf-8"))[name]
    ws.runspec("standins", "peer", {"standin": {**raw, "hf_repo": str(data)}})


def transcribe(seen, n):
    """A scripted model that knows each demo clip's words (the clips differ in length)."""
    import soundfile as sf

    lengths = {round(sf.info(str(DEMO / r["audio"])).duration, 3): r["reference"] for r in ROWS}
    return lengths[round(seen.audio_seconds[0], 3)]


def run_standin(ws, metric, handler):
    prompts = []

    def answer(seen, n):
        prompts.append(seen.text)
        return handler(seen, n)

    with ScriptedEndpoint(answer) as ep:
        ws.config([model(ep.url)], [["standin", metric]])
        result = ws.run()
    return result.scores[0], prompts


def test_an_au_harness_fleurs_locale_reads_transcription_and_sends_its_asr_prompt(ws):
    rows = [{"id": i, "audio": clip(i), "transcription": r["reference"].lower(), "raw_transcription": r["reference"]} for i, r in enumerate(ROWS)]
    shipped(ws, "fleurs_sw_ke", hub_folder(ws.root / "fleurs", {("sw_ke", "test"): rows}))
    score, prompts = run_standin(ws, "word_error_rate", transcribe)
    assert score.score == 0.0 and score.num_samples == 2
    assert prompts[0].startswith("Please transcribe the given speech. Return ONLY the transcribed speech in text format.")


def test_an_lmms_v03_librispeech_split_reads_gt_with_lmms_evals_prompt(ws):
    rows = [{"audio": clip(i), "gt": r["reference"].upper(), "source": "x", "task": "asr"} for i, r in enumerate(ROWS)]
    shipped(ws, "librispeech_test_clean@lmms_v0.3", hub_folder(ws.root / "ls", {("librispeech_test_clean", "librispeech_test_clean"): rows}))
    score, prompts = run_standin(ws, "word_error_rate", transcribe)
    assert score.score == 0.0
    assert set(prompts) == {"Please recognize the speech and only output the recognized content:"}


def test_an_lmms_v03_air_bench_foundation_split_is_multiple_choice_on_answer_gt(ws):
    rows = [{"audio": clip(i), "question": "What is heard?", "choice_a": "a voice", "choice_b": "a drum", "choice_c": None, "choice_d": None,
             "answer_gt": "a voice", "uniq_id": i, "task_name": "Sound_AQA"} for i in range(2)]
    shipped(ws, "air_bench_foundation_sound@lmms_v0.3", hub_folder(ws.root / "air", {("Foundation", "sound"): rows}))
    score, prompts = run_standin(ws, "accuracy", lambda s, n: "A")
    assert score.score == 100.0
    assert "What is heard?\nAnswer with the option's letter from the given choices directly." in prompts[0]


def test_a_kimi_dataset_reads_the_evalkits_jsonl_export(ws):
    folder = ws.root / "kimi" / "LibriSpeech"
    folder.mkdir(parents=True)
    lines = []
    for i, row in enumerate(ROWS):
        shutil.copy(DEMO / row["audio"], folder / f"{i}.wav")
        lines.append({"index": i, "audio_path": str(folder / f"{i}.wav"), "question": "Please transcribe the spoken content into written text.",
                      "answer": row["reference"], "subset": "test_clean", "task_type": "understanding"})
    (folder / "LibriSpeech.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    shipped(ws, "LibriSpeech@kimi", folder / "LibriSpeech.jsonl")
    score, prompts = run_standin(ws, "word_error_rate", transcribe)
    assert score.score == 0.0 and set(score.details["subsets"]) == {"test_clean"}
    assert set(prompts) == {"Please transcribe the spoken content into written text."}


@pytest.mark.parametrize("name", ["covost2_en_de@au_harness", "covost2_ar_en", "covost2_zh-CN_en@au_harness"])
def test_an_au_harness_covost2_pair_names_both_languages_and_keeps_the_source_for_comet(name):
    spec = CATALOG.datasets[name].spec
    source, target = {"covost2_en_de@au_harness": ("English", "German"), "covost2_ar_en": ("Arabic", "English"),
                      "covost2_zh-CN_en@au_harness": ("Chinese", "English")}[name]
    assert f"from {source} to {target}." in spec.prompt_template
    assert spec.transcript_column == "sentence" and spec.metrics == ["bleu", "meteor", "bertscore", "comet"]
