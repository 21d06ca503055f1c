"""Generated peer entries end to end: each shipped entry, only its data pointed at a few rows in the
hub dataset's (or the peer's export's) own layout, run against a scripted model."""

import json
import shutil

import pytest

from lalmeval.catalog.runspecs import BUILTIN_DIR, Catalog
from lalmeval.judging import templates as judge_templates
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


def test_a_kimi_openaudiobench_subset_entry_judges_only_its_subset_with_that_subsets_prompt(ws):
    folder = ws.root / "kimi" / "OpenAudioBench"
    folder.mkdir(parents=True)
    lines = []
    for i, subset in enumerate(["reasoning_qa", "trivia_qa", "reasoning_qa"]):
        shutil.copy(DEMO / ROWS[i % 2]["audio"], folder / f"{i}.wav")
        lines.append({"index": i, "audio_path": str(folder / f"{i}.wav"), "subset": subset, "question": "",
                      "audio_content": f"spoken question {i}", "answer": f"answer {i}", "task_type": "audio2text"})
    (folder / "OpenAudioBench.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    shipped(ws, "OpenAudioBench-reasoning_qa@kimi", folder / "OpenAudioBench.jsonl")
    with ScriptedEndpoint(lambda s, n: "an answer") as m, ScriptedEndpoint(lambda s, n: "这道题回答正确，但是没有中间过程，因此得4分，得分是[4]") as j:
        ws.config([model(m.url)], [["standin", "llm_judge_detailed"]],
                  judge_properties={"judge_model": "j", "judge_api_endpoint": j.url, "judge_concurrency": 1, "judge_retry_attempts": 0})
        result = ws.run()
        judged = sorted(s.text for s in j.requests)
    [score] = result.scores
    assert score.num_samples == 2 and set(score.details["subsets"]) == {"reasoning_qa"}  # the trivia_qa row is not selected
    assert score.score == pytest.approx(80.0) and score.details["judge_template"]["name"] == "kimi_openaudiobench_reasoning_qa"
    assert "## 题目\nspoken question 0\n## 标准答案:\nanswer 0\n## 学生回答:\nan answer" in judged[0]
    assert "spoken question 2" in judged[1]


def test_an_au_harness_task_with_both_judges_sends_each_its_own_prompt(ws):
    rows = [{"audio": clip(i), "instruction": "Is there noise in the recording?", "label": "yes"} for i in range(2)]
    data = hub_folder(ws.root / "noise", {("default", "test"): rows})  # DynamicSuperb's layout: audio, instruction, label
    shipped(ws, "noise_detection", data)
    with ScriptedEndpoint(lambda s, n: "yes") as m, ScriptedEndpoint(lambda s, n: '{"score": 1, "explanation": "matches"}') as j:
        ws.config([model(m.url)], [["standin", "llm_judge_binary"], ["standin", "llm_judge_detailed"]],
                  judge_properties={"judge_model": "j", "judge_api_endpoint": j.url, "judge_concurrency": 1, "judge_retry_attempts": 0})
        result = ws.run()
        systems = {s.system for s in j.requests}
    names = {s.metric: s.details["judge_template"]["name"] for s in result.scores}
    assert names == {"llm_judge_binary": "au_harness_binary_json", "llm_judge_detailed": "au_harness_detailed_json"}
    assert {s.metric: s.score for s in result.scores} == {"llm_judge_binary": 100.0, "llm_judge_detailed": 20.0}
    assert systems == {judge_templates.shipped()["au_harness_binary"].system, judge_templates.shipped()["au_harness_detailed"].system}
