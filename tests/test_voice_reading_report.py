"""report.html of a run with spoken replies whose text part was read carefully: the sample row shows the spoken
reply's audio and transcript and the reading rules, each in its place (the browser reads both from one row)."""

from tests.support.browser import dump_dom, parse
from tests.support.endpoint import ScriptedEndpoint
from tests.support.streaming import StreamingEndpoint
from tests.support.workspace import model


def test_a_spoken_reply_and_the_reading_rules_of_its_text_part_both_show_in_the_sample_row(ws):
    ws.text_questions(2)
    with StreamingEndpoint(lambda seen: "The original content of this audio is: 'answer " + seen.text.split()[-1] + "'", 0.1, 0.2, 0.3,
                           audio_seconds=1.0) as speaker, ScriptedEndpoint(lambda seen, n: "what the transcriber heard") as asr:
        ws.config([model(speaker.url, modalities=["text", "audio"], audio={"voice": "alloy", "format": "pcm16"}, stream=True)],
                  [["qs", "speech_wer"], ["qs", "word_error_rate"]], transcriber={"url": asr.url, "model": "asr", "timeout": 10})
        ws.run()
    run_dir = ws.root / "runs" / "t"
    text = parse(dump_dom((run_dir / "report.html").as_uri())).by_id("sample-rows").text
    assert text.count("heard (transcript of the speech)") == 2 and text.count("what the transcriber heard") == 2
    assert text.count("read: word_error_rate: ") == 2, text
    assert "raw reply" in text
