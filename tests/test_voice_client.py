"""Spoken replies in the client: streamed deltas assembled, their timing, the audio kept in the run folder, and the
settings that ask for them refused where they cannot apply."""

import base64
import json

import pytest
import soundfile as sf

from lalmeval.config.options import RunOptions
from lalmeval.config.schema import parse_config
from lalmeval.errors import UserError
from lalmeval.inference.client import COALESCE, DECODE_IN_THREAD
from lalmeval.inference.stream import assemble
from lalmeval.run.runner import run
from tests.support.endpoint import ScriptedEndpoint, answer_by_number
from tests.support.streaming import StreamingEndpoint, pieces, tone
from tests.support.workspace import demo_rows, model

FIRST_TOKEN, FIRST_AUDIO, END = 0.8, 1.6, 2.0


def _spoken(url: str, **settings):
    return model(url, modalities=["text", "audio"], audio={"voice": "alloy", "format": "pcm16"}, stream=True, **settings)


def test_ttft_and_ttfa_are_within_5_percent_of_a_streaming_endpoints_known_delays(ws):
    ws.text_questions(3)
    with StreamingEndpoint(lambda seen, n=0: answer_by_number(seen, 0), FIRST_TOKEN, FIRST_AUDIO, END) as endpoint:
        ws.config([_spoken(endpoint.url)], [["qs", "word_error_rate"]])
        result = ws.run()
    records = ws.records("qs", "m")
    assert len(records) == 3 and all(r["error"] is None for r in records)
    for record in records:
        # The endpoint kept its delays (a stall of the test process it shares with the run can only lengthen them),
        # and the client read each first within 5 % of when it was written, timed from the request.
        text, audio = endpoint.kept[record["reply"]]
        assert FIRST_TOKEN <= text < FIRST_TOKEN + 0.25 and FIRST_AUDIO <= audio < FIRST_AUDIO + 0.25
        assert record["ttft"] == pytest.approx(text, rel=0.05)
        assert record["ttfa"] == pytest.approx(audio, rel=0.05)
        # the end is seen at the next read after it: later deltas gather COALESCE seconds between reads
        assert END <= record["latency"] <= END * 1.05 + COALESCE
        # 40 completion tokens (the usage the stream reported) over the time after the first one
        assert record["tokens_per_second"] == pytest.approx(40 / (record["latency"] - record["ttft"]), rel=0.01)
        assert record["reply"] == f"answer {record['id'][1:]}" and record["prediction"] == record["reply"]
    (score,) = [s for s in result.scores if s.metric == "word_error_rate"]
    assert score.score == 0.0
    latency = score.details["latency"]
    assert set(latency["ttft"]) >= {"p50", "p90", "p99"} and set(latency["ttfa"]) >= {"p50", "p90", "p99"}
    kept = sorted(endpoint.kept.values())
    assert latency["ttft"]["p50"] == pytest.approx(kept[1][0], rel=0.05)
    assert latency["ttfa"]["p99"] == pytest.approx(max(audio for _, audio in kept), rel=0.05)
    final = json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())
    assert final["scores"][0]["details"]["latency"]["ttfa"]["p90"] == latency["ttfa"]["p90"]


def test_a_streamed_spoken_reply_is_kept_sample_for_sample_as_a_24_khz_wav_in_the_run_folder(ws):
    ws.text_questions(2)
    with StreamingEndpoint(lambda seen, n=0: "fine", 0.0, 0.0, 0.0, audio_seconds=1.5) as endpoint:
        ws.config([_spoken(endpoint.url)], [["qs", "word_error_rate"]])
        ws.run()
    for record in ws.records("qs", "m"):
        path = ws.root / "runs" / "t" / record["audio_path"]
        assert record["audio_path"].startswith("spoken/qs__m/") and path.suffix == ".wav"
        samples, rate = sf.read(path, dtype="int16")
        assert rate == 24000 and samples.tobytes() == tone(1.5)   # every piece decoded alone, padding and all
        assert record["audio_seconds"] == pytest.approx(1.5) and record["rtf"] > 0


def test_a_spoken_reply_larger_than_max_audio_mb_fails_its_sample_naming_the_key(ws):
    ws.text_questions(1)
    with StreamingEndpoint(lambda seen, n=0: "fine", 0.0, 0.0, 0.0, audio_seconds=2.0) as endpoint:
        ws.config([_spoken(endpoint.url, max_audio_mb=0.05)], [["qs", "word_error_rate"]])
        ws.run()
    (record,) = ws.records("qs", "m")
    assert record["error"].startswith("spoken reply: reply audio too large") and "max_audio_mb" in record["error"]
    assert record["audio_path"] is None


def test_assembling_a_stream_dates_each_first_by_the_network_read_that_completed_its_event():
    events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
              {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
              {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
              *({"choices": [{"index": 0, "delta": {"audio": {"data": p}}}]} for p in pieces(tone(0.2)))]
    raw = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
    second = raw.index(b"Hel")          # the first text arrives in the second network read ...
    third = raw.index(b'"data"')        # ... the first audio in the third
    marks = [(second, 1.0), (third, 2.0), (len(raw), 3.0)]
    assembled = assemble(raw, marks)
    assert assembled.first_token == 2.0 and assembled.first_audio == 3.0 and assembled.deltas == 2
    message = assembled.payload["choices"][0]["message"]
    assert message["content"] == "Hello" and b"".join(base64.b64decode(p) for p in message["audio"]["data"]) == tone(0.2)


def test_an_error_event_in_a_stream_is_read_as_the_servers_error():
    raw = b'data: {"error": {"message": "overloaded"}}\n\n'
    assert assemble(raw, [(len(raw), 0.0)]).payload == {"error": {"message": "overloaded"}}


@pytest.mark.parametrize("entry,message", [
    ({"stream": True, "modalities": ["text", "audio"], "audio": {"format": "wav"}}, "set audio.format: pcm16"),
    ({"audio": {"voice": "alloy"}}, 'add modalities: ["text", "audio"]'),
    ({"inference_type": "transcription", "modalities": ["text", "audio"]}, "inference_type transcription cannot ask for it"),
    ({"modalities": ["video"]}, "modalities"),
])
def test_settings_for_spoken_replies_that_cannot_apply_are_refused_in_one_line(entry, message):
    raw = {"dataset_metric": [["x", "speech_wer"]], "models": [{"name": "m", "url": "http://127.0.0.1:1/v1", "model": "m", **entry}]}
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_config(raw)


def test_speech_metrics_without_a_transcriber_or_a_speaking_model_say_what_to_add(ws):
    ws.text_questions(1)
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "speech_wer"]])
    with pytest.raises(UserError, match="no transcriber: add transcriber:"):
        ws.plan()
    ws.config([model("http://127.0.0.1:9/v1")], [["qs", "speech_wer"]], transcriber={"url": "http://127.0.0.1:9/v1", "model": "w"})
    with pytest.raises(UserError, match="no model entry asks for one"):
        ws.plan()


def test_a_spoken_metric_scores_what_was_said_not_the_text_part(ws):
    ws.text_questions(3)
    with StreamingEndpoint(lambda seen: answer_by_number(seen, 0), 0.0, 0.0, 0.0) as speaker, \
            ScriptedEndpoint(lambda seen, n: "answer 7") as asr:   # the speech says another answer than the text
        ws.config([_spoken(speaker.url)], [["qs", "accuracy"], ["qs", "spoken:accuracy"]],
                  transcriber={"url": asr.url, "model": "asr", "timeout": 10})
        result = ws.run()
    scores = {s.metric: s for s in result.scores}
    assert scores["accuracy"].score == 100.0 and scores["spoken:accuracy"].score == 0.0
    assert scores["spoken:accuracy"].num_samples == 3 and scores["spoken:accuracy"].num_failed == 0
    lines = (ws.root / "runs" / "t" / "scores" / "qs__spoken%3Aaccuracy__m.jsonl").read_text().splitlines()
    assert {json.loads(line)["speech_transcript"] for line in lines} == {"answer 7"}


def test_an_unknown_metric_after_spoken_is_refused_with_the_valid_names(ws):
    ws.text_questions(1)
    ws.config([_spoken("http://127.0.0.1:9/v1")], [["qs", "spoken:acuracy"]], transcriber={"url": "http://127.0.0.1:9/v1", "model": "w"})
    with pytest.raises(UserError, match="unknown metric 'spoken:acuracy'"):
        ws.plan()


def test_a_text_to_speech_model_on_a_dataset_that_sends_audio_is_refused_before_any_request(ws):
    ws.runspec("asr", "cmds", {"cmds": {"hf_repo": ws.jsonl(ws.copy_demo_audio(demo_rows(1))), "id_column": "id"}})
    ws.config([model("http://127.0.0.1:9/v1", inference_type="speech")], [["cmds", "word_error_rate"]])
    with pytest.raises(UserError, match="inference_type speech.*dataset 'cmds' sends audio.*modality: text"):
        ws.plan()


def test_a_generation_setting_a_text_to_speech_request_cannot_carry_is_refused_naming_it(ws):
    ws.text_questions(1)
    ws.config([model("http://127.0.0.1:9/v1", inference_type="speech", max_tokens=10)], [["qs", "word_error_rate"]])
    with pytest.raises(UserError, match="max_tokens cannot apply to inference_type speech"):
        ws.plan()


@pytest.mark.slow
def test_a_rescore_launches_the_transcriber_only_when_a_transcript_is_missing(ws, capfd):
    ws.text_questions(2)
    launch = "lalmeval serve --model echo --served-model-name asr --port {port}"   # its transcript: a JSON account of the clip
    with StreamingEndpoint(lambda seen: answer_by_number(seen, 0), 0.0, 0.0, 0.0) as speaker:
        ws.config([_spoken(speaker.url)], [["qs", "speech_wer"]],
                  transcriber={"url": "http://127.0.0.1:{port}/v1", "model": "asr", "launch": launch, "launch_timeout": 120})
        first = ws.run().scores[0]
    run_dir = ws.root / "runs" / "t"
    log = run_dir / "launch_transcriber.log"
    written = log.stat().st_mtime_ns
    capfd.readouterr()
    again = run(ws.plan(), ws.root / "runs", "t", quiet=True, options=RunOptions(reeval=True)).scores[0]
    assert (again.score, again.num_failed) == (first.score, 0) and log.stat().st_mtime_ns == written   # nothing launched
    (run_dir / "transcripts.jsonl").unlink()
    third = run(ws.plan(), ws.root / "runs", "t", quiet=True, options=RunOptions(reeval=True)).scores[0]
    assert (third.score, third.num_failed) == (first.score, 0) and log.stat().st_mtime_ns != written   # launched, to transcribe again
    assert "launching transcriber: a spoken reply has no kept transcript" in capfd.readouterr().err


def test_a_streamed_spoken_reply_past_the_size_decoded_in_a_thread_is_kept_whole_with_its_times(ws):
    seconds = 24.0   # 1.15 MB of pcm16, some 1.5 MB as base64 events: past the size decoded in a thread
    assert seconds * 24000 * 2 * 4 / 3 > DECODE_IN_THREAD
    ws.text_questions(1)
    with StreamingEndpoint(lambda seen, n=0: "fine", 0.0, 0.0, 0.0, audio_seconds=seconds) as endpoint:
        ws.config([_spoken(endpoint.url, max_reply_mb=64)], [["qs", "word_error_rate"]])
        ws.run()
    (record,) = ws.records("qs", "m")
    assert record["error"] is None and record["ttft"] is not None and record["ttfa"] is not None
    samples, rate = sf.read(ws.root / "runs" / "t" / record["audio_path"], dtype="int16")
    assert rate == 24000 and samples.tobytes() == tone(seconds)
