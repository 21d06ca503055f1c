"""report.html of a run with spoken replies: each reply plays beside its transcript and its text part, and the
latency plots show the time to first token and to first audio."""

import pytest

from tests.support.browser import dump_dom, parse
from tests.support.endpoint import ScriptedEndpoint
from tests.support.streaming import StreamingEndpoint
from tests.support.workspace import model
from tests.test_report_page import played


@pytest.mark.slow
def test_each_spoken_reply_plays_beside_its_transcript_and_text_part_and_ttft_ttfa_are_plotted(ws):
    ws.text_questions(3)
    with StreamingEndpoint(lambda seen: "answer " + seen.text.split()[-1], 0.1, 0.2, 0.3, audio_seconds=1.0) as speaker, \
            ScriptedEndpoint(lambda seen, n: "what the transcriber heard") as asr:
        ws.config([model(speaker.url, modalities=["text", "audio"], audio={"voice": "alloy", "format": "pcm16"}, stream=True)],
                  [["qs", "speech_wer"]], transcriber={"url": asr.url, "model": "asr", "timeout": 10})
        ws.run()
    run_dir = ws.root / "runs" / "t"
    rows = parse(dump_dom((run_dir / "report.html").as_uri())).by_id("sample-rows")
    assert [a.text for a in rows.all("a", "file")] == [f"spoken reply: spoken/qs__m/q{i}.wav" for i in range(3)]
    text = rows.text
    assert text.count("heard (transcript of the speech)") == 3 and text.count("what the transcriber heard") == 3
    assert all(f"answer {i}" in text for i in range(3))   # the text part, below the transcript
    assert [round(p["duration"], 2) for p in played(run_dir)] == [1.0, 1.0, 1.0]
    plots = parse(dump_dom((run_dir / "report.html").as_uri())).by_id("plots").text
    assert "m · TTFT (s)" in plots and "m · TTFA (s)" in plots
