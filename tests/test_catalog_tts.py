"""The catalog's text-to-speech intelligibility sets (Seed-TTS-eval) end to end: each shipped entry, only its data pointed
at a few rows in the hub copy's own layout, said aloud by a real speaker (espeak-ng) and heard by a scripted transcriber."""

import io
import json

import pytest
import soundfile as sf
from datasets import Audio

from lalmeval.catalog.runspecs import BUILTIN_DIR, Catalog
from tests.support.endpoint import ScriptedEndpoint
from tests.support.served import Served
from tests.test_catalog import clip, hub_folder
from tests.test_voice_serve import _require_espeak

CATALOG = Catalog.load([BUILTIN_DIR])
ENGLISH = ["turn on the lights", "what is the weather like this weekend in town", "play some music"]
CHINESE = ["打开wifi吧", "今天天气怎么样我们出去走走吧", "播放音乐"]


@pytest.fixture(scope="module")
def speaker():
    _require_espeak()
    with Served("--model", "espeak-ng") as served:
        yield served


def _standin(ws, name: str, sentences: list[str]) -> None:
    """Entry `name` as shipped, its hf_repo a folder laid out like TwinkStart/Seed-TTS-Eval (<subset>/train-*.parquet)."""
    raw = json.loads(CATALOG.datasets[name].source.read_text(encoding="utf-8"))[name]
    subset = raw["subset"]
    rows = [{"filename": f"{subset}_{i:03d}", "prompt_text": "a voice to copy", "prompt_audio": clip(i % 2), "text": text}
            for i, text in enumerate(sentences)]
    data = hub_folder(ws.root / "seed", {(subset, "train"): rows}, casts={"prompt_audio": Audio()})
    ws.runspec("tts", "standin", {"standin": {**raw, "hf_repo": str(data)}})


def _heard_by_length(speaker: Served, sentences: list[str], misheard: dict[str, str]) -> dict[float, str]:
    """What the scripted transcriber hears in a clip of each length: the sentence espeak-ng said (or its misheard form)."""
    lengths = {}
    for text in sentences:
        status, _, body = speaker.raw("POST", "/v1/audio/speech", json.dumps({"input": text, "voice": "alloy", "response_format": "wav"}).encode(),
                                      {"Content-Type": "application/json"})
        assert status == 200
        info = sf.info(io.BytesIO(body))
        lengths[round(info.frames / info.samplerate, 2)] = misheard.get(text, text)
    assert len(lengths) == len(sentences), "the sentences must differ in length for the transcriber to tell them apart"
    return lengths


def _run(ws, speaker: Served, heard: dict[float, str]):
    with ScriptedEndpoint(lambda seen, n: heard[round(seen.audio_seconds[0], 2)]) as asr:
        ws.config([{"name": "tts", "url": speaker.url, "model": "espeak-ng", "inference_type": "speech", "audio": {"voice": "alloy", "format": "wav"},
                    "batch_size": 2, "timeout": 60}], [["standin", "speech_wer"]], transcriber={"url": asr.url, "model": "asr", "timeout": 30})
        return ws.run()


def test_seed_tts_eval_en_says_each_rows_text_and_scores_word_errors_against_it(ws, speaker):
    _standin(ws, "seed_tts_eval_en", ENGLISH)
    heard = _heard_by_length(speaker, ENGLISH, {ENGLISH[1]: "what is the weather like this weekend in tow"})
    (score,) = _run(ws, speaker, heard).scores
    words = sum(len(s.split()) for s in ENGLISH)
    assert score.num_samples == 3 and score.num_failed == 0
    assert score.score == pytest.approx(100 * 1 / words)   # one word of the second sentence misheard
    records = sorted(ws.records("standin", "tts"), key=lambda r: r["id"])
    assert [r["id"] for r in records] == ["en_000", "en_001", "en_002"] and [r["reference"] for r in records] == ENGLISH
    assert all(r["audio_path"] for r in records)


def test_seed_tts_eval_zh_counts_every_character_as_a_unit(ws, speaker):
    _standin(ws, "seed_tts_eval_zh", CHINESE)
    heard = _heard_by_length(speaker, CHINESE, {CHINESE[0]: "打开wifu吧"})
    (score,) = _run(ws, speaker, heard).scores
    assert score.num_samples == 3 and score.num_failed == 0
    # One letter misheard, out of 25 characters: a latin word counts letter by letter (mixed units would count 22 tokens).
    assert score.score == pytest.approx(100 * 1 / 25)
