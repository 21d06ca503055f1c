"""The cross-run inference cache: off unless asked for (`cache: true`, `run --cache`; `--no-cache` wins),
and when it answers, the score table, final_scores.json and report.html say how much and from which run."""

import json

from lalmeval.cli.commands import main
from lalmeval.config.options import RunOptions
from lalmeval.reports.scores import score_table
from lalmeval.run.runner import run
from tests.support.endpoint import Reply, ScriptedEndpoint, answer_by_number
from tests.support.workspace import model

COUNT = 6


def go(ws, ep, run_id, options=RunOptions(), **config):
    ws.config([model(ep.url)], [["qs", "accuracy"]], **config)
    return run(ws.plan(), ws.root / "runs", run_id, quiet=True, options=options)


def test_a_redeployed_model_behind_the_same_url_and_id_is_asked_again_by_default(ws):
    """Monday's checkpoint answers wrongly; Tuesday's retrained one, behind the same URL and model id,
    answers rightly. A new run asks the server again and scores Tuesday's answers."""
    ws.text_questions(COUNT)
    with ScriptedEndpoint(lambda seen, n: "no idea") as ep:
        monday = go(ws, ep, "monday")
        ep.handler = answer_by_number
        tuesday = go(ws, ep, "tuesday")
        sent = len(ep.requests)
    assert (monday.scores[0].score, tuesday.scores[0].score) == (0.0, 100.0)
    assert sent == 2 * COUNT and tuesday.cache_hits == 0
    assert not (ws.root / "runs" / ".cache" / "m.jsonl").exists()   # off means nothing is written either


def test_the_cache_answers_only_when_the_config_or_the_cache_flag_asks_and_no_cache_wins(ws):
    ws.text_questions(COUNT)
    with ScriptedEndpoint(answer_by_number) as ep:
        go(ws, ep, "writes", cache=True)
        assert len(ep.requests) == COUNT
        go(ws, ep, "config", cache=True)
        assert len(ep.requests) == COUNT                         # cache: true
        go(ws, ep, "flag", options=RunOptions(use_cache=True))
        assert len(ep.requests) == COUNT                         # lalmeval run --cache
        go(ws, ep, "off")
        assert len(ep.requests) == 2 * COUNT                     # neither
        go(ws, ep, "no-cache", options=RunOptions(use_cache=False), cache=True)
        assert len(ep.requests) == 3 * COUNT                     # --no-cache over cache: true


def test_answers_from_the_cache_name_the_run_that_asked_for_them_in_the_table_and_the_report(ws):
    ws.text_questions(COUNT)
    with ScriptedEndpoint(answer_by_number) as ep:
        go(ws, ep, "monday", cache=True)
        tuesday = go(ws, ep, "tuesday", cache=True)
    records = ws.records("qs", "m", "tuesday")
    assert all(r["extra"] == {"cached": True, "cached_from": "monday"} for r in records)
    score = json.loads((ws.root / "runs" / "tuesday" / "final_scores.json").read_text())["scores"][0]
    assert score["details"]["from_cache"] == {"answers": COUNT, "runs": {"monday": COUNT}}
    table = score_table(tuesday.scores, [])
    header, row = ([c.strip() for c in line.split("│")[1:-1]] for line in (table.splitlines()[1], table.splitlines()[3]))
    assert dict(zip(header, row))["Cached"] == str(COUNT)
    note = f"m on qs: {COUNT} answer(s) came from the inference cache ({COUNT} from run monday), not from the server"
    assert note in table
    html = (ws.root / "runs" / "tuesday" / "report.html").read_text()
    assert '<th class="num">Cached</th>' in html and note in html


def test_cache_entries_that_do_not_name_their_run_come_from_an_earlier_run(ws):
    ws.text_questions(COUNT)
    with ScriptedEndpoint(answer_by_number) as ep:
        go(ws, ep, "old", cache=True)
        cache = ws.root / "runs" / ".cache" / "m.jsonl"
        entries = [json.loads(line) for line in cache.read_text().splitlines()]
        assert {e["run"] for e in entries} == {"old"}
        cache.write_text("".join(json.dumps({"key": e["key"], "reply": e["reply"]}) + "\n" for e in entries))
        again = go(ws, ep, "new", cache=True)
    assert again.scores[0].details["from_cache"] == {"answers": COUNT, "runs": {"an earlier run": COUNT}}
    assert "(6 from an earlier run)" in score_table(again.scores, [])


def test_a_run_answered_by_the_server_says_nothing_about_the_cache(ws):
    ws.text_questions(COUNT)
    with ScriptedEndpoint(answer_by_number) as ep:
        result = go(ws, ep, "fresh", cache=True)
    assert "from_cache" not in result.scores[0].details and "Cached" not in score_table(result.scores, [])


def test_printed_retry_and_resume_commands_keep_the_cache_flag(ws, capsys):
    ws.text_questions(COUNT)
    script = lambda seen, n: Reply(status=400, payload={"error": {"message": "bad"}}) if seen.text.endswith(" 0") else answer_by_number(seen, n)
    with ScriptedEndpoint(script) as ep:
        config = ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        code = main(["run", "--config", str(config), "--run-id", "c", "--cache"])
        err = capsys.readouterr().err
        assert code == 3 and " --cache --resume c" in err, err
        code = main(["run", "--config", str(config), "--run-id", "n", "--cache", "--no-cache"])
        err = capsys.readouterr().err
    assert code == 3 and " --no-cache --resume n" in err and " --cache " not in err, err


def test_without_the_cache_a_judge_still_reuses_the_judgments_of_its_own_run_only(ws):
    """Rescoring a run (--reeval) asks the judge nothing again; another run asks it anew, like the model."""
    ws.text_questions(3)
    with ScriptedEndpoint(answer_by_number) as ep, ScriptedEndpoint(lambda seen, n: "Rating: 1") as judge:
        ws.config([model(ep.url)], [["qs", "llm_judge_binary"]], judge_properties={"judge_model": "j", "judge_api_endpoint": judge.url})
        run(ws.plan(), ws.root / "runs", "a", quiet=True)
        run(ws.plan(), ws.root / "runs", "a", quiet=True, options=RunOptions(reeval=True))
        assert len(judge.requests) == 3
        run(ws.plan(), ws.root / "runs", "b", quiet=True)
        assert len(judge.requests) == 6
        run(ws.plan(), ws.root / "runs", "b", quiet=True, options=RunOptions(reeval=True, use_cache=False))
        assert len(judge.requests) == 9    # --no-cache: not even its own
