"""Settings that cannot apply are refused by `validate` and by `run` with one line, before any request."""

from __future__ import annotations

import contextlib
import io

import pytest

from lalmeval.cli.commands import main
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model


def cli(*argv: str) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    return code, err.getvalue().strip().splitlines()


def datasets(ws):
    """A Kimi jsonl, an EvalScope message list, an instruction-column set, plain questions and multiple choice."""
    rows = ws.copy_demo_audio(demo_rows(1))
    kimi = [{"index": 0, "audio_path": rows[0]["audio"], "question": "Transcribe this.", "answer": rows[0]["reference"], "subset": "s"}]
    vqa = [{"messages": [{"role": "user", "content": "Say yes."}], "answer": "yes"}]
    instructed = [{"id": "0", "audio": rows[0]["audio"], "instruction": "What is said?", "reference": rows[0]["reference"]}]
    mc = [{"id": "0", "question": "Pick B", "options": ["a", "b"], "answer": "B"}]
    ws.runspec("seed", "sets", {
        "kimi_set": {"hf_repo": ws.jsonl(kimi, "data/kimi.jsonl"), "format": "kimi"},
        "vqa_set": {"hf_repo": ws.jsonl(vqa, "data/vqa.jsonl"), "format": "general_vqa"},
        "instructed": {"hf_repo": ws.jsonl(instructed, "data/instructed.jsonl"), "id_column": "id", "additional_instruction_column": "instruction"},
        "plain": {"hf_repo": ws.jsonl(rows, "data/plain.jsonl"), "id_column": "id", "instruction": "Transcribe."},
        "mc_set": {"hf_repo": ws.jsonl(mc, "data/mc.jsonl"), "id_column": "id", "modality": "text", "audio_column": None,
                   "textual_input_column": "question", "choices_column": "options", "target_column": "answer"},
    })


CASES = {
    "rule instruction on Kimi rows": (
        "kimi_set", {"prompt_rules": [{"instruction": "Please transcribe."}]},
        "prompt_rules[0] sets an instruction that cannot apply to dataset 'kimi_set' (model 'm'): its rows carry their own instruction "
        "(format kimi, column 'question'), which wins over a rule's"),
    "rule instruction on message lists": (
        "vqa_set", {"prompt_rules": [{"language": "en", "instruction": "Answer briefly."}]},
        "prompt_rules[0] sets an instruction that cannot apply to dataset 'vqa_set' (model 'm'): its rows are whole message lists"),
    "rule instruction on an instruction column": (
        "instructed", {"prompt_rules": [{"task": "seed", "instruction": "Answer."}]},
        "prompt_rules[0] sets an instruction that cannot apply to dataset 'instructed' (model 'm'): its rows carry their own instruction "
        "(column 'instruction')"),
    "rule mc_template without options": (
        "plain", {"prompt_rules": [{"task": "plain", "mc_template": "mc_options"}]},
        "prompt_rules[0] sets mc_template, which cannot apply to dataset 'plain' (model 'm'): it has no options"),
    "shuffle without num_samples": ("plain", {"filters": {"shuffle": True}}, "filters.shuffle draws filters.num_samples samples at random, and num_samples is not set"),
    "long_audio without chunk_size": ("plain", {"model": {"long_audio": "vad"}}, "models 'm': long_audio says what to do with audio longer than chunk_size, and chunk_size is not set"),
    "system prompt to a transcription model": (
        "plain", {"model": {"inference_type": "transcription"}, "filters": {"system_prompts": ["audio_expert"]}},
        "models 'm' (inference_type transcription): a transcription request has no system message"),
    "max_tokens to a transcription model": ("plain", {"model": {"inference_type": "transcription", "max_tokens": 50}},
                                            "models 'm': max_tokens cannot apply to inference_type transcription"),
    "audio_format to a transcription model": ("plain", {"model": {"inference_type": "transcription", "audio_format": "audio_url"}},
                                              "models 'm': audio_format cannot apply to inference_type transcription"),
    "top_p to a transcription model": ("plain", {"model": {"inference_type": "transcription", "generation_kwargs": {"top_p": 0.5}}},
                                       "models 'm': generation_kwargs (top_p) cannot apply to inference_type transcription"),
    "aggregate of a metric its datasets are not scored with": (
        "plain", {"aggregate": [["bleu", ["plain"]]]},
        "aggregate[0]: no dataset it names (plain) is scored with bleu in this run, so the aggregate would be empty"),
    "message lists to a transcription model": ("vqa_set", {"model": {"inference_type": "transcription"}},
                                               "dataset 'vqa_set' has images, message lists or dialogues, which a transcription request cannot carry"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_setting_that_cannot_apply_is_refused_by_validate_and_run_in_one_line(ws, case):
    dataset, settings, message = CASES[case]
    datasets(ws)
    settings = dict(settings)
    entry = {**model("http://127.0.0.1:9/v1"), **settings.pop("model", {})}
    with ScriptedEndpoint() as ep:
        entry["url"] = ep.url
        ws.config([entry], [[dataset, "word_error_rate" if dataset != "mc_set" else "accuracy"]], output_dir=str(ws.root / "runs"), **settings)
        for command in (["validate"], ["run", "--run-id", "t"]):
            code, err = cli(*command, "--config", str(ws.root / "config.yaml"))
            assert code == 2 and len(err) == 1 and message in err[0], (command, err)
        assert ep.requests == [] and not (ws.root / "runs" / "t").exists()


def test_the_same_rule_narrowed_to_the_datasets_it_can_reach_runs(ws):
    datasets(ws)
    with ScriptedEndpoint(lambda seen, n: "x") as ep:
        ws.config([model(ep.url)], [["seed", "word_error_rate"]], prompt_rules=[{"task": "plain", "instruction": "Please transcribe."}])
        ws.run()
        assert any(s.text == "Please transcribe." for s in ep.requests)


RUNSPEC_CASES = {
    "answer_pattern without regex": ({"choices": ["a", "b"], "answer_pattern": "(A|B)"}, "answer_pattern is read only by answer_extraction regex"),
    "answer_extraction without options": ({"answer_extraction": "box"}, "answer_extraction reads a multiple-choice answer, and this dataset has no options"),
    "segment outside callhome": ({"segment": "turns"}, "segment cuts a CallHome folder (format callhome), and this entry's format is not set"),
    "window_s with utterances": ({"format": "callhome", "window_s": 20}, "window_s sizes the windows of segment turns"),
    "instruction on message lists": ({"format": "general_vqa", "instruction": "Answer."}, "instruction cannot apply with messages_column"),
    "text input on message lists": ({"messages_column": "m", "textual_input_column": "q"}, "textual_input_column cannot apply with messages_column"),
    "turns on message lists": ({"messages_column": "m", "turns_column": "t"}, "turns_column cannot apply with messages_column"),
    "text input beside turns": ({"turns_column": "t", "textual_input_column": "q"}, "textual_input_column cannot apply with turns_column"),
    "options beside turns": ({"turns_column": "t", "choices": ["a", "b"]}, "choices cannot apply with turns_column"),
}


@pytest.mark.parametrize("case", sorted(RUNSPEC_CASES))
def test_a_runspec_field_that_cannot_apply_is_refused_naming_the_file_and_dataset(ws, case):
    fields, message = RUNSPEC_CASES[case]
    path = ws.runspec("seed", "bad", {"bad": {"hf_repo": "data/x.jsonl", **fields}})
    ws.config([model("http://127.0.0.1:9/v1")], [["bad", "word_error_rate"]])
    code, err = cli("validate", "--config", str(ws.root / "config.yaml"))
    assert code == 2 and err == [f"error: {path}: dataset 'bad': {message}" + err[0].split(message, 1)[1]], err
