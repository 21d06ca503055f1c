"""Engines, shared inference, failure accounting, aggregates and the run directory."""

import json

import pytest
import soundfile as sf

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.workspace import DEMO, demo_rows, model


def asr_dataset(ws, count=6, **spec):
    rows = ws.copy_demo_audio(demo_rows(count))
    ws.runspec("speech_recognition", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id", "metrics": ["word_error_rate", "accuracy"], **spec}})
    return rows


def row_seconds(row):
    info = sf.info(str(DEMO / "audio" / row["audio"].split("/")[-1]))
    return info.frames / info.samplerate


def row_of(rows):
    """Which row a request's clip is: every demo clip has a distinct length."""
    table = {row_seconds(r): r for r in rows}
    return lambda seen: table[seen.audio_seconds[0]]


def reference_by_audio(rows):
    """A handler that 'recognizes' each clip perfectly (the endpoint double knows the answers)."""
    find = row_of(rows)
    return lambda seen, n: find(seen)["reference"]


def test_two_metrics_on_one_dataset_share_one_inference_pass(ws):
    rows = asr_dataset(ws)
    with ScriptedEndpoint(reference_by_audio(rows)) as ep:
        ws.config([model(ep.url)], [["cmds", "word_error_rate"], ["cmds", "accuracy"]])
        result = ws.run()
        assert len(ep.requests) == len(rows)
    scores = {s.metric: s for s in result.scores}
    assert scores["word_error_rate"].score == 0.0
    assert scores["accuracy"].score == 100.0
    assert result.requests_sent == len(rows)


def test_metric_all_expands_to_runspec_metrics(ws):
    asr_dataset(ws, count=2)
    with ScriptedEndpoint() as ep:
        ws.config([model(ep.url)], [["cmds", "all"]])
        assert sorted(m for _, m in ws.plan().pairs) == ["accuracy", "word_error_rate"]


def test_failed_requests_are_counted_and_excluded_never_scored_zero(ws):
    rows = asr_dataset(ws, count=6)
    find = row_of(rows)

    def half_broken(seen, n):
        if find(seen)["id"] == rows[1]["id"]:
            return Reply(status=400, payload={"error": {"message": "unsupported audio"}})
        return find(seen)["reference"]

    with ScriptedEndpoint(half_broken) as ep:
        ws.config([model(ep.url)], [["cmds", "accuracy"]])
        result = ws.run()
    score = result.scores[0]
    assert (score.num_samples, score.num_failed) == (6, 1)
    assert score.score == 100.0  # 5 of 5 scored samples correct; the failure is not a 0
    assert score.details["failures"] == {"HTTP 400": 1}
    failed = [r for r in ws.records("cmds", "m") if r["error"]]
    assert failed[0]["error"] == "HTTP 400: unsupported audio" and failed[0]["attempts"] == 1


def test_every_model_runs_each_engine_and_the_table_has_one_row_per_pair(ws):
    rows = asr_dataset(ws, count=3)
    with ScriptedEndpoint(reference_by_audio(rows)) as good, ScriptedEndpoint(lambda s, n: "something else entirely") as bad:
        ws.config([model(good.url, "good"), model(bad.url, "bad")], [["cmds", "word_error_rate"]])
        result = ws.run()
    by_model = {s.model: s.score for s in result.scores}
    assert by_model["good"] == 0.0 and by_model["bad"] > 50


def test_run_directory_layout_and_final_scores_schema(ws):
    rows = asr_dataset(ws, count=3)
    with ScriptedEndpoint(reference_by_audio(rows)) as ep:
        ws.config([model(ep.url, auth_token="tok-abcdefghijklmnop")], [["cmds", "word_error_rate"]])
        ws.run("r1")
    run_dir = ws.root / "runs" / "r1"
    final = json.loads((run_dir / "final_scores.json").read_text())
    assert set(final) == {"run_id", "created", "versions", "scores", "aggregates", "comparisons", "failures", "interrupted", "stopped", "endpoints_down",
                          "data_errors", "broken_off", "provenance", "usage"}
    assert set(final["scores"][0]) == {"model", "dataset", "metric", "score", "num_samples", "num_failed", "details", "ci95", "stderr", "usage"}
    record = ws.records("cmds", "m", "r1")[0]
    for key in ("id", "prompt", "params", "reply", "prediction", "reference", "latency", "attempts", "error"):
        assert key in record
    scores = (run_dir / "scores" / "cmds__word_error_rate__m.jsonl").read_text().splitlines()
    assert len(scores) == 3 and "errors" in json.loads(scores[0])
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert "tok-abcdefghijklmnop" not in path.read_text(errors="ignore"), path


def test_aggregate_reports_weighted_and_unweighted_means(ws):
    rows = ws.copy_demo_audio(demo_rows(4))
    ws.runspec("qa", "labels", {
        "small": {"hf_repo": ws.jsonl(rows[:1], "data/small.jsonl"), "id_column": "id"},
        "large": {"hf_repo": ws.jsonl(rows[1:], "data/large.jsonl"), "id_column": "id"},
    })
    first = rows[0]["reference"]
    with ScriptedEndpoint(lambda s, n: first) as ep:  # right on 'small' only
        ws.config([model(ep.url)], [["labels", "accuracy"]], aggregate=[["accuracy", ["labels"]]])
        result = ws.run()
    agg = result.aggregates[0]
    assert agg["unweighted_mean"] == pytest.approx(50.0)      # (100 + 0) / 2
    assert agg["weighted_mean"] == pytest.approx(25.0)        # 1 correct of 4 samples
    assert agg["num_samples"] == 4 and agg["datasets"] == ["large", "small"]


def test_chinese_is_scored_by_character_error_rate(ws):
    rows = ws.copy_demo_audio(demo_rows(2))
    rows[0]["reference"], rows[1]["reference"] = "今天天气很好。", "我们去公园"
    ws.runspec("asr", "zh", {"zh_set": {"hf_repo": ws.jsonl(rows), "language": "chinese", "id_column": "id"}})
    replies = {rows[0]["id"]: "今天天气很好", rows[1]["id"]: "我们去公圆吧"}
    find = row_of(rows)
    with ScriptedEndpoint(lambda s, n: replies[find(s)["id"]]) as ep:
        ws.config([model(ep.url, batch_size=1)], [["zh_set", "word_error_rate"]])
        score = ws.run().scores[0]
    # 11 reference characters; 1 substitution (园→圆) + 1 insertion (吧); punctuation ignored.
    assert score.details["unit"] == "mixed"
    assert score.details["corpus_wer"] == pytest.approx(2 / 11)
    assert score.score == pytest.approx(100 * 2 / 11)
