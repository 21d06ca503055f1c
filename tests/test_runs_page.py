"""lalmeval report RUN...: samples of several runs side by side, word-level diffs, worst first, 'A worse than B', paged rows."""

import json

from lalmeval.cli.commands import main
from lalmeval.reports.rundir import load_run
from lalmeval.reports.side_by_side import payload
from lalmeval.reports.side_by_side_page import PAGE_ROWS
from tests.support.browser import dump_dom, parse, screenshot
from tests.support.endpoint import ScriptedEndpoint
from tests.support.noisy_model import NoisyModel, noisy_datasets
from tests.support.workspace import model, demo_rows

NAMES = ["set0", "set1"]


def two_runs(ws, samples=60):
    references = noisy_datasets(ws, NAMES, samples)
    for run_id, seed, worse in (("base", 1, None), ("cand", 2, ("set1", 0.3))):
        with ScriptedEndpoint(NoisyModel(references, seed, worse)) as ep:
            ws.config([model(ep.url)], [[n, "word_error_rate"] for n in NAMES])
            ws.run(run_id)
    return [ws.root / "runs" / r for r in ("base", "cand")]


def per_sample_wer(run_dir, dataset):
    path = run_dir / "scores" / f"{dataset}__word_error_rate__m.jsonl"
    return {item["id"]: item["score"] for item in map(json.loads, path.read_text().splitlines())}


def board(ws, tmp_path, runs):
    out = tmp_path / "board.html"
    assert main(["report", *map(str, runs), "--out", str(out)]) == 0
    return out


def test_samples_are_rows_and_runs_are_columns_with_each_runs_own_prediction_and_score(ws, tmp_path):
    runs = two_runs(ws)
    data = payload([load_run(r) for r in runs], tmp_path)
    assert data["columns"] == ["base", "cand"] and len(data["rows"]["id"]) == 2 * 60
    for c, run in enumerate(runs):
        records = {(d, r["id"]): r for d in NAMES for r in ws.records(d, "m", run.name)}
        scores = {(d, i): v for d in NAMES for i, v in per_sample_wer(run, d).items()}
        for row, (d, sample) in enumerate(zip(data["rows"]["dataset"], data["rows"]["id"])):
            key = (NAMES[d], sample)
            assert data["strings"][data["pred"][c][row]] == records[key]["prediction"]
            assert data["scores"][c][row] == [scores[key]]


def test_the_page_holds_one_page_of_rows_and_shows_word_level_differences(ws, tmp_path):
    page = board(ws, tmp_path, two_runs(ws))
    dom = parse(dump_dom(page.as_uri()))
    rows = dom.by_id("rb-body").all("tr")
    assert len(rows) == PAGE_ROWS < 2 * 60
    assert dom.by_id("rb-pager").text == f"rows 1–{PAGE_ROWS} of 120 (of 120 samples)"
    marks = {(n.tag, tuple(n.classes)) for row in rows for n in row.all() if n.tag in ("del", "ins")}
    assert {("del", ("sub",)), ("ins", ("sub",))} <= marks   # substitutions shown as the reference's word and the prediction's


def test_a_worse_than_b_lists_exactly_the_samples_where_a_scored_worse_worst_first(ws, tmp_path):
    runs = two_runs(ws)
    page = board(ws, tmp_path, runs)
    base, cand = per_sample_wer(runs[0], "set1"), per_sample_wer(runs[1], "set1")
    worse = sorted((i for i in base if cand[i] > base[i]), key=lambda i: (-cand[i], int(i[1:])))
    state = "#rb:filter=worse&a=1&b=0&metric=1|0&sort=1|1|0&worst=1"
    dom = parse(dump_dom(page.as_uri() + state))
    shown = [row.all("b")[0].text for row in dom.by_id("rb-body").all("tr")]
    assert shown == worse[:PAGE_ROWS] and worse
    png = screenshot(page.as_uri() + state, tmp_path / "worse.png", height=1400)
    assert png.stat().st_size > 10_000


def test_changed_between_runs_keeps_only_samples_whose_prediction_or_score_differs(ws, tmp_path):
    runs = two_runs(ws, samples=20)
    page = board(ws, tmp_path, runs)
    base, cand = ({(d, r["id"]): r["prediction"] for d in NAMES for r in ws.records(d, "m", run)} for run in ("base", "cand"))
    changed = sum(1 for key in base if base[key] != cand[key])
    dom = parse(dump_dom(page.as_uri() + "#rb:filter=changed"))
    assert dom.by_id("rb-pager").text.startswith(f"rows 1–{min(changed, PAGE_ROWS)} of {changed} ")


def test_each_sample_plays_its_audio(ws, tmp_path):
    rows = ws.copy_demo_audio(demo_rows(3))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    for run_id in ("a", "b"):
        with ScriptedEndpoint(lambda seen, n: "turn on the lights") as ep:
            ws.config([model(ep.url)], [["cmds", "word_error_rate"]])
            ws.run(run_id)
    page = board(ws, tmp_path, [ws.root / "runs" / "a", ws.root / "runs" / "b"])
    data = payload([load_run(ws.root / "runs" / r) for r in ("a", "b")], tmp_path)
    assert all(i is not None for i in data["rows"]["clip"])
    assert all(data["files"][data["clips"][i]["file"]]["src"].startswith("data:audio/") for i in data["rows"]["clip"])
    dom = parse(dump_dom(page.as_uri()))
    assert len(dom.by_id("rb-body").all("button", "rb-play")) == 3
