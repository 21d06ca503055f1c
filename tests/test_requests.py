"""What reaches the endpoint: prompts, params, auth, audio encoding, chunking, transcription."""

import base64
import io

import numpy as np
import pytest
import soundfile as sf

from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model


def one_dataset(ws, count=2, **spec):
    rows = ws.copy_demo_audio(demo_rows(count))
    ws.runspec("speech_recognition", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id", "instruction": "Transcribe.", **spec}})
    return rows


def run_and_capture(ws, model_settings=None, **config):
    with ScriptedEndpoint() as ep:
        ws.config([model(ep.url, **(model_settings or {}))], [["cmds", "word_error_rate"]], **config)
        ws.run()
    return ep.requests


def test_chat_request_carries_instruction_and_16k_wav_input_audio(ws):
    one_dataset(ws, count=1)
    with ScriptedEndpoint() as ep:
        ws.config([model(ep.url)], [["cmds", "word_error_rate"]])
        ws.run()
    body = ep.requests[0].body
    assert ep.requests[0].path == "/v1/chat/completions" and body["model"] == "scripted-m"
    assert body["messages"] == [{"role": "user", "content": [body["messages"][0]["content"][0], body["messages"][0]["content"][1]]}]
    text, audio = body["messages"][0]["content"]
    assert text == {"type": "text", "text": "Transcribe."}
    assert audio["type"] == "input_audio" and audio["input_audio"]["format"] == "wav"
    data, rate = sf.read(io.BytesIO(base64.b64decode(audio["input_audio"]["data"])), dtype="int16")
    assert rate == 16000 and data.ndim == 1 and len(data) > 8000


def test_audio_format_audio_url_sends_a_data_uri(ws):
    one_dataset(ws, count=1)
    requests = run_and_capture(ws, dict(audio_format="audio_url"))
    part = requests[0].body["messages"][0]["content"][1]
    assert part["type"] == "audio_url" and part["audio_url"]["url"].startswith("data:audio/wav;base64,")


def test_system_prompts_and_add_ons_come_from_prompts_files(ws):
    one_dataset(ws, count=1)
    (ws.root / "prompts.yaml").write_text("system_prompts:\n  mine: Be terse.\nuser_prompt_add_ons:\n  asr_clean_output: Only words.\n")
    requests = run_and_capture(ws, filters={"system_prompts": ["mine", "concise"], "user_prompt_add_ons": ["asr_clean_output"]}, prompts_file="prompts.yaml")
    seen = requests[0]
    assert seen.system == "Be terse.\n\nAnswer as briefly as possible, without explanations."
    assert seen.text == "Transcribe.\nOnly words."  # the user file overrides the shipped add-on


def test_unknown_prompt_name_is_an_error_naming_the_filter(ws):
    from lalmeval.errors import UserError

    one_dataset(ws, count=1)
    ws.config([model("http://127.0.0.1:9/v1")], [["cmds", "word_error_rate"]], filters={"system_prompts": ["audio_exprt"]})
    with pytest.raises(UserError, match=r"filters.system_prompts: unknown prompt 'audio_exprt' \(did you mean 'audio_expert'\?\)"):
        ws.plan()


def test_row_instruction_column_replaces_the_default_and_text_modality_sends_no_audio(ws):
    rows = ws.copy_demo_audio(demo_rows(1))
    rows[0].update(question="What room?", transcript="turn on the light")
    ws.runspec("qa", "spoken", {"cmds": {"hf_repo": ws.jsonl(rows), "instruction": "default", "additional_instruction_column": "question", "textual_input_column": "transcript", "modality": "text"}})
    requests = run_and_capture(ws)
    assert requests[0].text == "What room?\nturn on the light"
    assert requests[0].audio_seconds == []


def test_temperature_overrides_most_specific_wins(ws):
    rows = ws.copy_demo_audio(demo_rows(1))
    ws.runspec("asr", "commands", {"a_set": {"hf_repo": ws.jsonl(rows)}, "b_set": {"hf_repo": ws.jsonl(rows)}})
    ws.runspec("other", "misc", {"c_set": {"hf_repo": ws.jsonl(rows)}})
    overrides = [
        {"model": "m1", "temperature": 0.1},
        {"task": "asr", "temperature": 0.2},
        {"task": "b_set", "temperature": 0.3},
        {"model": "m1", "task": "commands", "temperature": 0.4},
    ]
    ws.config([model("http://h/v1", "m1"), model("http://h/v1", "m2", temperature=0.9)], [["a_set", "accuracy"]], temperature_overrides=overrides)
    plan = ws.plan()
    m1, m2 = plan.config.models
    ds = {d.name: d for d in plan.catalog.datasets.values()}
    assert plan.temperature(m1, ds["a_set"]) == 0.4   # model+task
    assert plan.temperature(m1, ds["c_set"]) == 0.1   # model only
    assert plan.temperature(m2, ds["a_set"]) == 0.2   # task (category)
    assert plan.temperature(m2, ds["b_set"]) == 0.3   # task (dataset beats category)
    assert plan.temperature(m2, ds["c_set"]) == 0.9   # the model's own default


def test_generation_params_reach_the_request_and_the_record(ws):
    one_dataset(ws, count=1)
    requests = run_and_capture(ws, dict(max_tokens=64, temperature=0.3))
    assert requests[0].body["temperature"] == 0.3 and requests[0].body["max_tokens"] == 64
    assert ws.records("cmds", "m")[0]["params"] == {"temperature": 0.3, "max_tokens": 64}


def test_bearer_token_and_azure_api_version(ws):
    one_dataset(ws, count=1)
    plain = run_and_capture(ws, dict(auth_token="tok123"))
    assert plain[0].headers["Authorization"] == "Bearer tok123"
    azure = run_and_capture(ws, dict(auth_token="tok123", api_version="2024-10-01"))
    assert azure[0].headers["api-key"] == "tok123" and "Authorization" not in azure[0].headers
    assert azure[0].query == {"api-version": "2024-10-01"}


def test_transcription_type_posts_multipart_with_language_and_temperature(ws):
    one_dataset(ws, count=1, language="fr")
    requests = run_and_capture(ws, dict(inference_type="transcription", temperature=0.2))
    seen = requests[0]
    assert seen.path == "/v1/audio/transcriptions"
    assert seen.form["model"] == "scripted-m" and seen.form["language"] == "fr" and seen.form["temperature"] == "0.2"
    assert seen.audio_seconds[0] > 0.5


def test_chunk_size_splits_long_audio_and_joins_outputs_in_order(ws):
    tone = (0.1 * np.sin(np.arange(16000 * 5) / 16000 * 2 * np.pi * 440)).astype("float32")
    (ws.root / "data").mkdir()
    sf.write(ws.root / "data" / "long.wav", tone, 16000)
    ws.runspec("asr", "long", {"cmds": {"hf_repo": ws.jsonl([{"audio": "long.wav", "reference": "a b c"}])}})

    def by_length(seen, n):  # 2 s, 2 s, 1 s chunks: answer by position, with latency reversed
        return {2.0: "first", 1.0: "last"}[round(seen.audio_seconds[0], 1)]

    with ScriptedEndpoint(by_length) as ep:
        ws.config([model(ep.url, chunk_size=2)], [["cmds", "word_error_rate"]])
        ws.run()
    assert sorted(round(r.audio_seconds[0], 1) for r in ep.requests) == [1.0, 2.0, 2.0]
    record = ws.records("cmds", "m")[0]
    assert record["prediction"] == "first first last" and record["chunks"] == 3
