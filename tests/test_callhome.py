"""CallHome folder → rows, on the synthesized fixture (tests/fixtures/callhome/make_callhome_fixture.py)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jiwer
import numpy as np
import pytest
import soundfile as sf
from whisper_normalizer.english import EnglishTextNormalizer

from lalmeval.catalog.runspecs import Dataset, DatasetSpec
from lalmeval.data.callhome import Turn, find_calls, read_callhome, windows
from lalmeval.errors import UserError
from lalmeval.media.audio import prepare
from lalmeval.metrics.wer import WordErrorRate
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.results.records import Record

normalize_english = EnglishTextNormalizer()

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "callhome"
SPOKEN = json.loads((FIXTURE / "spoken.json").read_text(encoding="utf-8"))


def rows(segment="utterance", window_s=30.0, root=FIXTURE):
    columns, iterator = read_callhome(root, segment, window_s)
    return columns, list(iterator)


def copy_fixture(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "callhome", ignore=shutil.ignore_patterns("*.py", "*.json")))


def test_utterance_references_equal_the_hand_cleaned_texts():
    _, got = rows()
    assert [r["reference"] for r in got if r["call"] == "5001"] == [
        "hello is that you Maria",
        "yeah it's me how are you",
        "oh I am good I am good thanks",
        "did you have you talked to lately",
        "no not since because he moved to New York",
        "oh really",
        "yeah he got a job there",
        "that's great news",
    ]
    expected = [u["reference"] for call in ("5001", "5002") for u in SPOKEN[call] if u["reference"]]
    assert [r["reference"] for r in got] == expected


def test_utterance_row_shape_points_at_the_calls_audio_span():
    columns, got = rows()
    assert columns == ["id", "audio", "reference", "speaker", "call"]
    first = got[0]
    assert first == {
        "id": "5001_0000",
        "audio": {"path": str(FIXTURE / "audio" / "5001.wav"), "start": SPOKEN["5001"][0]["start"], "end": SPOKEN["5001"][0]["end"]},
        "reference": "hello is that you Maria",
        "speaker": "A",
        "call": "5001",
    }
    assert Path(first["audio"]["path"]).is_absolute()
    assert got[-1]["audio"]["path"].endswith("5002.flac")
    assert [r["speaker"] for r in got if r["call"] == "5002"] == ["A", "B", "A", "A", "A", "B", "B", "A"]


def test_untimed_and_laughter_only_utterances_are_left_out_and_counted():
    calls = {c.name: c for c in find_calls(FIXTURE)}
    assert (calls["5001"].untimed, calls["5001"].empty) == (1, 1)
    assert (calls["5002"].untimed, calls["5002"].empty) == (1, 0)
    _, got = rows()
    # ids number the timed utterances, so the laughter (5001_0003) leaves a gap rather than renumbering
    assert [r["id"] for r in got if r["call"] == "5001"][2:4] == ["5001_0002", "5001_0004"]


def test_each_utterance_span_decodes_to_that_stretch_of_the_call():
    _, got = rows()
    for row in got:
        audio = row["audio"]
        pcm = prepare(audio["path"], span=(audio["start"], audio["end"])).pcm
        assert abs(len(pcm) - (audio["end"] - audio["start"]) * 16000) <= 2
        # the bullet was placed on the synthesized speech: the span is speech from edge to edge
        assert np.sqrt(np.mean(pcm[:1600].astype(float) ** 2)) > 300
        assert np.sqrt(np.mean(pcm[-1600:].astype(float) ** 2)) > 100


def test_word_error_rate_on_the_rows_is_jiwer_on_the_normalized_texts():
    _, got = rows()
    said = [u["said"] for call in ("5001", "5002") for u in SPOKEN[call] if u["reference"]]
    metric = WordErrorRate(Dataset("callhome", "c", "t", DatasetSpec(hf_repo="x", language="english"), Path("x.json")), GeneralPostprocessor())
    records = [Record(id=r["id"], prompt="", system=None, params={}, reference=r["reference"], prediction=s) for r, s in zip(got, said)]
    value, details = metric.aggregate([metric.score_record(r) for r in records])
    expected = jiwer.wer([normalize_english(r["reference"]) for r in got], [normalize_english(s) for s in said])
    assert value == pytest.approx(100 * expected, abs=1e-9)
    # Hand-worked: the spoken "Ben" (transcribed xxx) and the fragment "ch" are the only extra words;
    # the filler "uh" is dropped by the English normalizer as it is by the cleaning rules.
    assert (details["insertions"], details["substitutions"], details["deletions"]) == (2, 0, 0)


def test_turn_windows_hold_whole_turns_of_at_most_the_window():
    columns, got = rows("turns", 6.0)
    assert columns == ["id", "audio", "reference", "call"]
    call = [r for r in got if r["call"] == "5002"]
    assert [r["reference"] for r in call] == [
        "A: guess what I did today\nB: what",
        # three utterances of A in a row are one turn of ~8 s: longer than the window, so alone
        "A: I went to the new ice cream shop downtown they had chocolate and vanilla and fresa and the line was long so I waited",
        "B: wow wow I want I want to go too\nA: yes you should",
    ]
    spoken = SPOKEN["5002"]
    timed = [u for u in spoken if u["reference"]]
    assert [(r["audio"]["start"], r["audio"]["end"]) for r in call] == [
        (timed[0]["start"], timed[1]["end"]), (timed[2]["start"], timed[4]["end"]), (timed[5]["start"], timed[7]["end"]),
    ]
    assert [r["id"] for r in call] == ["5002_w000", "5002_w001", "5002_w002"]
    for r in got:
        lines = r["reference"].split("\n")
        assert r["audio"]["end"] - r["audio"]["start"] <= 6.0 or len(lines) == 1


def test_turn_windows_together_hold_every_turn_in_order():
    _, small = rows("turns", 6.0)
    _, whole = rows("turns", 1e9)
    assert [r["id"] for r in whole] == ["5001_w000", "5002_w000"]
    for call in ("5001", "5002"):
        joined = "\n".join(r["reference"] for r in small if r["call"] == call)
        assert joined == next(r["reference"] for r in whole if r["call"] == call)


def test_window_packing_closes_before_a_turn_that_would_overflow():
    t = [Turn("A", "a", 0.0, 2.0), Turn("B", "b", 1.5, 4.0), Turn("A", "c", 4.5, 6.5), Turn("B", "d", 7.0, 20.0), Turn("A", "e", 20.5, 21.0)]
    assert [[x.text for x in w] for w in windows(t, 5.0)] == [["a", "b"], ["c"], ["d"], ["e"]]
    assert [[x.text for x in w] for w in windows(t, 6.5)] == [["a", "b", "c"], ["d"], ["e"]]


def test_audio_may_be_flac_or_mp3_with_the_transcripts_name(tmp_path):
    root = copy_fixture(tmp_path)
    data, rate = sf.read(root / "audio" / "5001.wav")
    sf.write(root / "audio" / "5001.mp3", data, rate, format="MP3")
    (root / "audio" / "5001.wav").unlink()
    _, got = rows(root=root)
    row = next(r for r in got if r["call"] == "5001")
    assert row["audio"]["path"].endswith("5001.mp3")
    pcm = prepare(row["audio"]["path"], span=(row["audio"]["start"], row["audio"]["end"])).pcm
    assert abs(len(pcm) - (row["audio"]["end"] - row["audio"]["start"]) * 16000) <= 2


def test_wav_is_preferred_when_a_call_has_several_audio_files(tmp_path):
    root = copy_fixture(tmp_path)
    shutil.copy(root / "audio" / "5002.flac", root / "audio" / "5001.flac")
    _, got = rows(root=root)
    assert next(r for r in got if r["call"] == "5001")["audio"]["path"].endswith("5001.wav")


def one_line_error(root, *args) -> str:
    with pytest.raises(UserError) as err:
        read_callhome(root, *args)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_missing_folder_says_where_to_put_transcripts_and_audio(tmp_path):
    message = one_line_error(tmp_path / "nowhere")
    assert f"{tmp_path / 'nowhere' / 'transcripts'}/" in message and f"{tmp_path / 'nowhere' / 'audio'}/" in message


def test_folder_without_transcripts_says_where_to_get_and_put_them(tmp_path):
    (tmp_path / "transcripts").mkdir()
    message = one_line_error(tmp_path)
    assert message.startswith(f"{tmp_path / 'transcripts'}: no .cha transcripts") and "talkbank.org" in message


def test_transcript_without_audio_names_the_file_to_put_and_where(tmp_path):
    root = copy_fixture(tmp_path)
    (root / "audio" / "5002.flac").unlink()
    message = one_line_error(root)
    assert "no audio for 5002.cha: put 5002.wav" in message and f"in {root / 'audio'}/" in message


def test_unreadable_audio_is_an_error_naming_the_file(tmp_path):
    root = copy_fixture(tmp_path)
    (root / "audio" / "5002.flac").write_bytes(b"not audio at all")
    assert one_line_error(root).startswith(f"{root / 'audio' / '5002.flac'}: not readable audio")


def test_undecodable_transcript_is_an_error_naming_the_file(tmp_path):
    root = copy_fixture(tmp_path)
    path = root / "transcripts" / "5001.cha"
    path.write_bytes(path.read_bytes().replace(b"Maria", b"Mar\xeda"))
    assert one_line_error(root).startswith(f"{path}: not UTF-8 text")


@pytest.mark.parametrize("args,fragment", [(("speakers",), "unknown CallHome segment 'speakers'"), (("turns", 0.0), "positive number of seconds")])
def test_bad_segmentation_settings_are_errors(args, fragment):
    assert fragment in one_line_error(FIXTURE, *args)


def test_without_pylangacq_a_callhome_transcript_names_the_extra_that_reads_it(tmp_path):
    # pylangacq is the .[callhome] extra, not a core dependency: a run that needs it says how to install it.
    probe = ("import sys; sys.modules['pylangacq'] = None\n"
             "from pathlib import Path\nfrom lalmeval.data.chat import parse_chat\nfrom lalmeval.errors import UserError\n"
             "try:\n    parse_chat('*A:\\thello .\\n', Path('call.cha'))\nexcept UserError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "call.cha: reading CallHome's CHAT transcripts needs the pylangacq package: pip install" in out.stdout, out
    assert "[callhome]" in out.stdout
