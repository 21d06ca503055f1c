"""speech_wer and speech_consistency against the real speaking server (espeak-ng) and a real transcriber (Whisper tiny.en):
the score is what transcribing the stored reply files directly and scoring them with jiwer gives."""

import jiwer
import pytest

from lalmeval.config.options import RunOptions
from lalmeval.metrics.normalize import normalizer, units_of
from lalmeval.run.runner import run
from tests.support.served import Served
from tests.test_voice_serve import _require_espeak

SENTENCES = ["turn on the kitchen lights", "what is the weather this weekend", "play the radio in the living room",
             "set an alarm for seven thirty tomorrow", "the quick brown fox jumps over the lazy dog"]


@pytest.fixture(scope="module")
def servers():
    _require_espeak()
    with Served("--model", "espeak-ng") as speaker, Served("--model", "whisper-tiny.en", timeout=300) as whisper:
        yield speaker, whisper


def _said_aloud(ws, speaker_url: str, transcriber_url: str) -> None:
    rows = [{"id": f"s{i}", "text": text, "reference": text} for i, text in enumerate(SENTENCES)]
    ws.runspec("tts", "say", {"say": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "audio_column": None,
                                      "textual_input_column": "text", "instruction": ""}})
    base = {"url": speaker_url, "model": "espeak-ng", "batch_size": 4, "timeout": 60}
    models = [{"name": "chat", **base, "modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}},
              {"name": "streamed", **base, "modalities": ["text", "audio"], "audio": {"voice": "nova", "format": "pcm16"}, "stream": True},
              {"name": "tts", **base, "inference_type": "speech", "audio": {"voice": "echo", "format": "mp3"}}]
    ws.config(models, [["say", "speech_wer"], ["say", "speech_consistency"], ["say", "spoken:word_error_rate"]],
              transcriber={"url": transcriber_url, "model": "whisper-tiny.en", "timeout": 120})


@pytest.mark.slow
def test_speech_wer_equals_jiwer_over_the_stored_replies_transcribed_directly(ws, servers):
    speaker, whisper = servers
    _said_aloud(ws, speaker.url, whisper.url)
    result = ws.run()
    english = normalizer("whisper_english", "en")
    for name in ("chat", "streamed", "tts"):
        records = sorted(ws.records("say", name), key=lambda r: r["id"])
        assert len(records) == len(SENTENCES) and all(r["error"] is None and r["audio_path"] for r in records), records
        heard = []
        for record in records:
            path = ws.root / "runs" / "t" / record["audio_path"]
            reply = whisper.client.audio.transcriptions.create(model="whisper-tiny.en", file=(path.name, path.read_bytes()), language="en",
                                                               temperature=0)
            heard.append(" ".join(units_of(english, reply.text.strip(), "word")))
        said = [" ".join(units_of(english, r["reference"], "word")) for r in records]
        (score,) = [s for s in result.scores if s.model == name and s.metric == "speech_wer"]
        assert score.num_samples == len(SENTENCES) and score.num_failed == 0
        assert score.score == pytest.approx(100 * jiwer.wer(said, heard), abs=1e-9)
        assert score.score < 40   # espeak-ng is intelligible to Whisper: most words come through
        (consistency,) = [s for s in result.scores if s.model == name and s.metric == "speech_consistency"]
        assert consistency.num_failed == 0 and consistency.score == pytest.approx(score.score, abs=1e-9)  # it says its text part
        (content,) = [s for s in result.scores if s.model == name and s.metric == "spoken:word_error_rate"]
        assert content.score == pytest.approx(score.score, abs=1e-9)   # any text metric over what was said: here the same WER
    streamed = ws.records("say", "streamed")
    # The speaking server synthesizes a whole reply before it streams, so its first text and first audio arrive together
    # (either may be read first); their order against scripted delays is tests/test_voice_client.py's to check.
    assert all(r["ttft"] is not None and r["ttfa"] is not None and r["ttft"] > 0 and r["ttfa"] > 0 for r in streamed), streamed


@pytest.mark.slow
def test_a_rescore_reads_the_cached_transcripts_and_asks_the_transcriber_nothing(ws, servers):
    speaker, _ = servers
    with Served("--model", "whisper-tiny.en", timeout=300) as whisper:
        _said_aloud(ws, speaker.url, whisper.url)
        first = {(s.model, s.metric): s.score for s in ws.run().scores}
    cached = (ws.root / "runs" / "t" / "transcripts.jsonl").read_text().splitlines()
    assert len(cached) == 3 * len(SENTENCES)   # one per reply: the metrics of a reply share its transcript
    # The transcriber is gone: a rescore that asked it anything would fail those samples.
    again = run(ws.plan(), ws.root / "runs", "t", quiet=True, options=RunOptions(reeval=True))
    assert {(s.model, s.metric): s.score for s in again.scores} == first
    assert all(s.num_failed == 0 for s in again.scores)
