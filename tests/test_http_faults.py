"""A whole run over a network that drops connections at random: every sample still ends as exactly one record."""

import random

import pytest

from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.workspace import demo_rows, model


@pytest.mark.parametrize("stream", [False, True])
def test_random_dropped_connections_at_batch_64_leave_every_sample_one_record(ws, stream):
    rows = ws.copy_demo_audio(demo_rows(40))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    dice = random.Random(5)

    def flaky(seen, n):
        # A third of all requests, retries included, lose their connection before a byte of reply.
        return Reply(drop=True) if dice.random() < 1 / 3 else f"reply {n}"

    with ScriptedEndpoint(flaky) as endpoint:
        ws.config([model(endpoint.url, batch_size=64, retry_attempts=2, stream=stream)], [["cmds", "word_error_rate"]])
        result = ws.run()
    records = ws.records("cmds", "m")
    assert sorted(r["id"] for r in records) == sorted(str(row["id"]) for row in rows)   # none lost, none twice
    failed = [r for r in records if r["error"]]
    assert all(r["error"].startswith("connection error") and r["prediction"] is None for r in failed)
    assert all(r["prediction"].startswith("reply ") for r in records if not r["error"])
    assert len(endpoint.requests) >= len(records) + sum(r["attempts"] - 1 for r in records)
    score = result.scores[0]
    assert score.num_samples == 40 and score.num_failed == len(failed)
