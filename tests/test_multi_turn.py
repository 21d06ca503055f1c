"""Multi-turn samples (MT-Bench style): each reply goes back into the conversation before the next
turn; judges score every turn and the sample."""

import json

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model

DIALOGUES = [
    {"id": "d0", "turns": ["Name a fruit.", "Now give its colour."], "reference": json.dumps(["apple", "red"])},
    {"id": "d1", "turns": ["Say a number.", "Double it.", "Add one."]},
]


def reply(seen, n):
    """The model double: numbers its replies by how many assistant turns the request already holds."""
    messages = seen.body["messages"]
    asked = [m for m in messages if m["role"] == "user"]
    answered = [m for m in messages if m["role"] == "assistant"]
    assert len(asked) == len(answered) + 1  # every earlier turn comes back with its reply
    return f"reply {len(answered) + 1} to {asked[-1]['content'][0]['text']}"


def dialogues(ws, rows=DIALOGUES, **spec):
    ws.runspec("chat", "mt", {"mt": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "audio_column": None,
                                     "turns_column": "turns", "target_column": None, **spec}})


def test_a_two_turn_sample_sends_the_first_reply_back_in_the_second_request(ws):
    dialogues(ws)
    with ScriptedEndpoint(reply) as ep:
        ws.config([model(ep.url)], [["mt", "word_error_rate"]])
        ws.run()
        second = next(s for s in ep.requests if "Now give its colour." in s.text)
    messages = second.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == "reply 1 to Name a fruit."
    records = {r["id"]: r for r in ws.records("mt", "m")}
    assert [t["reply"] for t in records["d1"]["extra"]["turns"]] == ["reply 1 to Say a number.", "reply 2 to Double it.", "reply 3 to Add one."]
    assert records["d1"]["reply"] == "reply 3 to Add one." and len(ep.requests) == 5


def test_one_clip_per_turn_goes_with_its_turn(ws):
    rows = ws.copy_demo_audio(demo_rows(2))
    dialogues(ws, [{"id": "a", "turns": ["First clip?", "Second clip?"], "audio": [r["audio"] for r in rows]}], modality="audio", audio_column="audio")
    with ScriptedEndpoint(reply) as ep:
        ws.config([model(ep.url)], [["mt", "word_error_rate"]])
        ws.run()
        per_request = [len(s.audio_seconds) for s in ep.requests]
        second = ep.requests[1].body["messages"]
    assert per_request == [1, 2]  # the second request carries the first turn's clip again, and its own
    assert [p["type"] for p in second[0]["content"]] == ["text", "input_audio"] and [p["type"] for p in second[2]["content"]] == ["text", "input_audio"]


def test_the_judge_scores_every_turn_and_the_sample_scores_their_mean(ws):
    dialogues(ws)
    seen_by_judge = []

    def judge(seen, n):
        seen_by_judge.append(seen.text)
        return "Rating: 5" if "reply 1" in seen.text.split("[Model Answer]")[-1] else "Rating: 3"

    with ScriptedEndpoint(reply) as model_ep, ScriptedEndpoint(judge) as judge_ep:
        ws.runspec("chat", "mt", {"mt": {"hf_repo": "data/set.jsonl", "id_column": "id", "modality": "text", "audio_column": None, "turns_column": "turns", "target_column": "reference"}})
        ws.config([model(model_ep.url)], [["mt", "llm_judge_detailed"]],
                  judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url})
        result = ws.run()
    assert len(seen_by_judge) == 5  # one judgment per turn
    later = next(t for t in seen_by_judge if "Double it." in t.split("[Model Answer]")[0] and "(The user now says)" in t)
    assert "User: Say a number.\nAssistant: reply 1 to Say a number." in later
    with_reference = next(t for t in seen_by_judge if "Now give its colour." in t and "red" in t)
    assert "[Reference Answer]\nred" in with_reference
    score = result.scores[0]
    assert score.details["turns"] == pytest.approx([100.0, 60.0, 60.0])
    assert score.score == pytest.approx(100 * ((5 + 3) / 2 + (5 + 3 + 3) / 3) / 2 / 5)


@pytest.mark.parametrize("reference", [[], "[]"])
def test_an_empty_per_turn_reference_list_means_no_reference(ws, reference):
    """MT-Bench categories without references hold an empty list (as a list or its JSON text): every
    turn is judged without a reference, never against the text "[]"."""
    dialogues(ws, [{"id": "d", "turns": ["Write a haiku.", "Now a limerick."], "reference": reference}], target_column="reference")
    with ScriptedEndpoint(reply) as model_ep, ScriptedEndpoint(lambda seen, n: "Rating: 4") as judge_ep:
        ws.config([model(model_ep.url)], [["mt", "llm_judge_detailed"]], judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url})
        result = ws.run()
        seen_by_judge = [s.text for s in judge_ep.requests]
    assert len(seen_by_judge) == 2 and all("[Reference Answer]" not in t and "There is no reference answer" in t for t in seen_by_judge)
    line = json.loads((ws.root / "runs" / "t" / "scores" / "mt__llm_judge_detailed__m.jsonl").read_text())
    assert [t["variant"] for t in line["turns"]] == ["open", "open"] and result.scores[0].score == 80.0


def test_a_dialogue_whose_later_turns_changed_is_not_answered_from_the_cache(ws):
    """Two dialogues with the same first turn and the same words, split into turns differently, are
    different conversations: the second is sent, not answered with the first's replies."""
    with ScriptedEndpoint(reply) as ep:
        ws.config([model(ep.url)], [["mt", "word_error_rate"]], cache=True)
        dialogues(ws, [{"id": "d", "turns": ["Say a number.", "Double it.\n\nAdd one."]}])
        ws.run("two")
        ws.run("two-again")
        assert len(ep.requests) == 2   # the same dialogue is answered from the cache, whole
        dialogues(ws, [{"id": "d", "turns": ["Say a number.", "Double it.", "Add one."]}])
        ws.run("three")
        sent = len(ep.requests)
    assert ws.records("mt", "m", "two-again")[0]["extra"]["cached"]
    record = ws.records("mt", "m", "three")[0]
    assert sent == 2 + 3 and len(record["extra"]["turns"]) == 3 and not record["extra"].get("cached")
