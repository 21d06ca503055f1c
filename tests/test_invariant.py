"""The invariant: every selected sample of every pass ends as exactly one record — a prediction or an
error with its reason — whatever the endpoint replies and whatever raises along the way."""

import json

import pytest

from lalmeval.cli.commands import main
from lalmeval.inference.client import retry_after
from lalmeval.metrics import METRICS
from lalmeval.metrics.accuracy import Accuracy
from lalmeval.postprocess import POSTPROCESSORS
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.results.ledger import InvariantError, Ledger
from lalmeval.results.records import Record
from tests.support.endpoint import Reply, ScriptedEndpoint, chat_payload
from tests.support.workspace import model

COUNT = 9


def questions(ws, count=COUNT, **spec):
    """A text dataset: sample i asks 'question i' and its reference is 'answer i'."""
    rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(count)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None, **spec}})
    return rows


def index_of(seen) -> int:
    return int(seen.text.split()[-1])


def records_by_id(ws, dataset="qs", model_name="m"):
    lines = ws.records(dataset, model_name)
    ids = [line["id"] for line in lines]
    assert len(ids) == len(set(ids)), "a sample has two records"
    return {line["id"]: line for line in lines}


WRONG_SHAPES = {
    "number": (123, "bad reply: reply is a number, not an object"),
    "list": ([1, 2], "bad reply: reply is a list, not an object"),
    "string": ("hello", "bad reply: reply is a string, not an object"),
    "null": (None, "bad reply: reply is null, not an object"),
    "no choices": ({"id": "x"}, "bad reply: reply has no 'choices'"),
    "error object in a 200": ({"error": {"message": "overloaded"}}, "bad reply: reply holds an error instead of choices: overloaded"),
    "choices not a list": ({"choices": "x"}, "bad reply: 'choices' is a string, not a list"),
    "empty choices": ({"choices": []}, "bad reply: reply has empty 'choices'"),
    "null choice": ({"choices": [None]}, "bad reply: choices[0] is null, not an object"),
    "message is text": ({"choices": [{"message": "hello"}]}, "bad reply: choices[0].message is a string, not an object"),
    "no message": ({"choices": [{"index": 0}]}, "bad reply: choices[0].message is null, not an object"),
    "content is a number": ({"choices": [{"message": {"content": 123}}]}, "bad reply: reply content is a number, not text"),
    "content is an object": ({"choices": [{"message": {"content": {"a": 1}}}]}, "bad reply: reply content is an object, not text"),
    "part without text": ({"choices": [{"message": {"content": [{"type": "text", "text": 5}]}}]}, "bad reply: a text content part has no string 'text'"),
    "part is a number": ({"choices": [{"message": {"content": [7]}}]}, "bad reply: a content part is a number, not an object"),
    "content null": (chat_payload(None), "bad reply: reply content is null"),
}


@pytest.mark.parametrize("shape", list(WRONG_SHAPES))
def test_wrong_shaped_replies_are_recorded_retried_and_never_lose_a_sample(ws, shape):
    payload, reason = WRONG_SHAPES[shape]
    questions(ws, count=3)
    with ScriptedEndpoint(lambda seen, n: Reply(payload=payload)) as ep:
        ws.config([model(ep.url, retry_attempts=1)], [["qs", "accuracy"]])
        result = ws.run()
        assert len(ep.requests) == 6  # each sample tried twice: a wrong shape is retryable
    records = records_by_id(ws)
    assert sorted(records) == ["q0", "q1", "q2"]
    assert all(r["error"] == reason and r["attempts"] == 2 for r in records.values()), [r["error"] for r in records.values()]
    score = result.scores[0]
    assert (score.num_samples, score.num_failed, score.score) == (3, 3, None)
    assert not result.complete


RAW_BODIES = {
    "truncated JSON": b'{"choices": [',
    "not UTF-8": b"\xff\xfe\xfa",
    "empty body": b"",
    "nesting deeper than the parser's stack": b"[" * 200_000 + b"]" * 200_000,
}


@pytest.mark.parametrize("body", list(RAW_BODIES))
def test_unparseable_200_bodies_are_recorded_as_malformed(ws, body):
    questions(ws, count=2)
    with ScriptedEndpoint(lambda seen, n: Reply(raw=RAW_BODIES[body])) as ep:
        ws.config([model(ep.url, retry_attempts=0)], [["qs", "accuracy"]])
        result = ws.run()
    records = records_by_id(ws)
    assert len(records) == 2 and all(r["error"].startswith("malformed JSON reply") for r in records.values())
    assert result.scores[0].num_failed == 2


@pytest.mark.parametrize("value,expected", [("soon", None), ("", None), ("nan", None), ("Wed, 99 Foo 2015", None),
                                            ("-5", 0.0), ("1e400", 300.0), ("2", 2.0)])
def test_retry_after_that_is_not_a_number_or_date_falls_back_to_backoff(value, expected):
    assert retry_after(value) == expected


def test_mixed_endpoint_every_sample_has_a_record_and_the_score_is_the_successes_score(ws, capsys):
    """Correct replies, wrong-shaped 200s and 429s with a Retry-After that is not a number."""
    rows = questions(ws, count=12)
    tries: dict[int, int] = {}

    def mixed(seen, n):
        i = index_of(seen)
        tries[i] = tries.get(i, 0) + 1
        if i % 3 == 1:
            return Reply(payload={"choices": [{"message": "hello"}]})            # wrong shape, always
        if i % 3 == 2 and tries[i] == 1:
            return Reply(status=429, payload={}, headers={"Retry-After": "a little later"})
        return f"answer {i}" if i % 2 == 0 else "wrong"                          # i odd answers wrongly

    with ScriptedEndpoint(mixed) as ep:
        config = ws.config([model(ep.url, retry_attempts=1)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = main(["run", "--config", str(config), "--run-id", "t"])
    records = records_by_id(ws)
    assert sorted(records) == sorted(r["id"] for r in rows)
    succeeded = [i for i in range(12) if i % 3 != 1]
    assert all(records[f"q{i}"]["error"] is None for i in succeeded)
    assert all(records[f"q{i}"]["error"].startswith("bad reply") for i in range(12) if i % 3 == 1)
    final = json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"][0]
    correct = sum(1 for i in succeeded if i % 2 == 0)
    assert final["score"] == pytest.approx(100.0 * correct / len(succeeded))
    assert (final["num_samples"], final["num_failed"]) == (12, 4)
    assert code == 3
    assert "4 sample(s) failed (bad reply: 4)" in capsys.readouterr().err


def test_a_reply_larger_than_the_cap_fails_its_sample_at_once(ws):
    questions(ws, count=3)
    big = "x" * 300_000
    handler = lambda seen, n: big if index_of(seen) == 1 else f"answer {index_of(seen)}"  # noqa: E731
    with ScriptedEndpoint(handler) as ep:
        ws.config([model(ep.url, max_reply_mb=0.1, retry_attempts=3)], [["qs", "accuracy"]])
        result = ws.run()
        assert len(ep.requests) == 3  # too large is not retried: the same request would get the same reply
    records = records_by_id(ws)
    assert records["q1"]["error"] == "reply too large: more than 0.1 MB (max_reply_mb)"
    assert records["q0"]["prediction"] == "answer 0" and result.scores[0].score == 100.0


@POSTPROCESSORS.register("ExplodingOnSevens")
class ExplodingOnSevens(GeneralPostprocessor):
    """A user's postprocessor with a bug: it raises on replies containing a 7."""

    def process(self, reply: str) -> str:
        if "7" in reply:
            raise ValueError("cannot handle sevens")
        return super().process(reply)


def test_an_exception_in_a_processor_fails_only_its_sample(ws):
    questions(ws, count=10, postprocessor="ExplodingOnSevens")
    with ScriptedEndpoint(lambda seen, n: f"answer {index_of(seen)}") as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]])
        result = ws.run()
    records = records_by_id(ws)
    assert len(records) == 10
    assert records["q7"]["error"] == "internal error: ValueError: cannot handle sevens"
    assert all(records[f"q{i}"]["prediction"] == f"answer {i}" for i in range(10) if i != 7)
    score = result.scores[0]
    assert (score.num_samples, score.num_failed, score.score) == (10, 1, 100.0)


@METRICS.register("accuracy_failing_on_q3")
class FailingOnQ3(Accuracy):
    """A metric with a bug that raises whenever a batch holds sample q3."""

    name = "accuracy_failing_on_q3"

    def score_record(self, record: Record):
        if record.id == "q3":
            raise KeyError("boom")
        return super().score_record(record)


def test_an_exception_in_a_metric_is_a_counted_scoring_failure_not_a_lost_sample(ws, capsys):
    questions(ws, count=5)
    with ScriptedEndpoint(lambda seen, n: f"answer {index_of(seen)}") as ep:
        config = ws.config([model(ep.url, batch_size=1)], [["qs", "accuracy_failing_on_q3"]], output_dir=str(ws.root / "runs"))
        code = main(["run", "--config", str(config), "--run-id", "t"])
    final = json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"][0]
    assert final["num_samples"] == 5 and final["num_failed"] >= 1
    assert final["details"]["failures"]["scoring failed"] == final["num_failed"]
    lines = [json.loads(x) for x in (ws.root / "runs" / "t" / "scores" / "qs__accuracy_failing_on_q3__m.jsonl").read_text().splitlines()]
    assert sorted(x["id"] for x in lines) == ["q0", "q1", "q2", "q3", "q4"]
    assert next(x for x in lines if x["id"] == "q3")["error"] == "scoring failed: KeyError: 'boom'"
    assert code == 3


def test_a_pass_that_cannot_go_on_fails_every_remaining_sample_with_the_reason(ws):
    questions(ws, count=4)
    # The model's cache file cannot be read (EIO, as from a failing disk): /proc/self/mem at offset 0.
    # (A folder or a named pipe there is refused at start: see test_bad_input.)
    (ws.root / "runs" / ".cache").mkdir(parents=True)
    (ws.root / "runs" / ".cache" / "m.jsonl").symlink_to("/proc/self/mem")
    with ScriptedEndpoint(lambda seen, n: "answer") as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], cache=True)
        result = ws.run()
        assert not ep.requests
    records = records_by_id(ws)
    assert len(records) == 4
    assert all(r["error"].startswith("pass failed: internal error: OSError: [Errno 5]") for r in records.values())
    assert (result.scores[0].num_samples, result.scores[0].num_failed) == (4, 4) and not result.complete


def blank(unit):
    return Record(id=unit[0], repeat=unit[1], prompt="", system=None, params={}, reference=None)


def test_ledger_accepts_exactly_one_record_per_selected_sample():
    published, persisted = [], []
    ledger = Ledger(["a", "b", "c"], published.append, persisted.append, blank)
    ledger.settle(Record(id="a", prompt="p", system=None, params={}, reference="r", prediction="x"))
    with pytest.raises(InvariantError):
        ledger.settle(blank(("a", 0)))
    with pytest.raises(InvariantError):
        ledger.settle(blank(("z", 0)))
    assert ledger.fail_open("stopped", persist=False) == 2
    assert [r.id for r in published] == ["a", "b", "c"] and [r.id for r in persisted] == ["a"]
    assert [r.error for r in published[1:]] == ["stopped", "stopped"]
    assert ledger.selected == 3 and ledger.open_count == 0


def test_with_repeats_the_ledger_owes_one_record_per_sample_and_repeat():
    published = []
    ledger = Ledger(["a", "b"], published.append, lambda r: None, blank, repeats=3)
    assert ledger.selected == 6
    ledger.settle(Record(id="a", repeat=2, prompt="p", system=None, params={}, reference="r", prediction="x"))
    with pytest.raises(InvariantError):
        ledger.settle(Record(id="a", repeat=2, prompt="p", system=None, params={}, reference="r", prediction="y"))
    assert ledger.fail_open("stopped", persist=False) == 5
    assert sorted(r.unit for r in published) == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)]
