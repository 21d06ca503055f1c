"""Reports a person opens: report.html (checked as Chromium renders it), results.csv, results.md, leaderboards."""

import csv
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

import pytest
import soundfile as sf

from lalmeval.reports import load_run, render_run
from lalmeval.reports.html import run_report
from lalmeval.reports.samples import collect
from lalmeval.reports.svg import Bar, bar_chart, histogram, nice_ticks
from tests.support.browser import dump_dom, parse, screenshot
from tests.support.endpoint import Reply, ScriptedEndpoint, chat_payload
from tests.support.workspace import DEMO, REPO, Workspace, demo_rows, model


def limit_file_size(max_bytes):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return apply


# A reply that would run script if any report put it into the page as HTML.
INJECTION = '</script><script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'"> & done'
COUNT = 12
LONG = 1500  # words in one reply: longer than the page shows of any text


def clip_seconds(row):
    info = sf.info(str(DEMO / "audio" / row["audio"].split("/")[-1]))
    return info.frames / info.samplerate


def two_models(rows):
    """'good' repeats each reference; 'flaky' fails two clips with HTTP 400, answers one with markup and one at great
    length, and drops a word elsewhere."""
    index = {clip_seconds(r): i for i, r in enumerate(rows)}

    def handler(seen, n):
        i = index[seen.audio_seconds[0]]
        reference = rows[i]["reference"]
        if seen.body["model"] == "good":
            return reference
        if i in (0, 1):
            return Reply(status=400, payload={"error": {"message": f"unsupported audio <b>clip {i}</b>"}})
        if i == 3:
            return reference + " la" * LONG
        return INJECTION if i == 2 else reference.rsplit(" ", 1)[0]
    return handler


def make_run(ws, run_id, handler, count=COUNT):
    rows = ws.copy_demo_audio(demo_rows(count))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    with ScriptedEndpoint(handler(rows)) as ep:
        ws.config([model(ep.url, name="good", model="good"), model(ep.url, name="flaky", model="flaky", retry_attempts=0)],
                  [["cmds", "word_error_rate"], ["cmds", "accuracy"]], aggregate=[["accuracy", ["cmds"]]])
        ws.run(run_id)
    return ws.root / "runs" / run_id, rows


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A real run: two models, two metrics, two failed samples, one reply full of markup."""
    return make_run(Workspace(tmp_path_factory.mktemp("reports")), "r1", two_models)[0]


def final(run_dir):
    return json.loads((run_dir / "final_scores.json").read_text())


def test_every_run_writes_html_csv_and_markdown_reports(run_dir):
    for name in ("report.html", "results.csv", "results.md"):
        assert (run_dir / name).stat().st_size > 0, name
    rows = list(csv.DictReader((run_dir / "results.csv").open()))
    scores = final(run_dir)["scores"]
    assert [(r["model"], r["dataset"], r["metric"]) for r in rows] == [(s["model"], s["dataset"], s["metric"]) for s in scores]
    for row, score in zip(rows, scores):
        assert float(row["score"]) == pytest.approx(score["score"])  # full precision in the CSV
        assert int(row["num_samples"]) == COUNT and int(row["num_failed"]) == score["num_failed"]
        assert row["partial"] == "false"
        assert [float(row["ci_low"]), float(row["ci_high"]), float(row["stderr"])] == pytest.approx([*score["ci95"], score["stderr"]])
    flaky = next(s for s in scores if s["model"] == "flaky" and s["metric"] == "word_error_rate")
    assert flaky["num_failed"] == 2
    markdown = (run_dir / "results.md").read_text()
    low, high = flaky["ci95"]
    assert f"| flaky | cmds | word_error_rate | {flaky['score']:.2f} | [{low:.2f}, {high:.2f}] | {COUNT} | 2 |" in markdown
    assert "| good | cmds | accuracy | 100.00 |" in markdown and "## Aggregates" in markdown


def test_report_html_is_self_contained(run_dir):
    page = (run_dir / "report.html").read_text()
    markup = re.sub(r'<script type="application/json".*?</script>', "", page, flags=re.S)  # replies may mention URLs
    assert not re.search(r"<link|<iframe|\bsrc=|@import|url\(", markup)
    # The endpoints' URLs are settings, shown as text in the Settings section; no other URL is anywhere.
    settings = re.search(r'<section id="settings">.*?</section>', page, flags=re.S).group(0)
    assert not re.search(r"(href|src|action)=\S*https?://", settings)
    assert re.findall(r"https?://[^\s\"'<]+", page.replace(settings, "")) == ["http://www.w3.org/2000/svg"] * page.count("<svg ")


def test_untrusted_replies_are_text_never_markup(run_dir):
    page = (run_dir / "report.html").read_text()
    assert page.count("<script") == 2  # the data block and the browser script, nothing a reply brought
    assert INJECTION not in page and "<img" not in page
    assert re.search(r"unsupported audio &lt;b&gt;clip [01]&lt;/b&gt;", page)  # failure reasons are escaped too
    dom = parse(dump_dom((run_dir / "report.html").as_uri() + "#q=pwned"))
    assert dom.all("title")[0].text == "lalmeval run r1"
    assert not dom.all("img")
    shown = dom.by_id("sample-rows").all("tr")
    assert len(shown) == 1 and INJECTION in shown[0].text  # shown as the text it is


def rendered(run_dir, query=""):
    return parse(dump_dom((run_dir / "report.html").as_uri() + query))


def test_chromium_shows_scores_plots_and_every_sample(run_dir, tmp_path):
    png = screenshot((run_dir / "report.html").as_uri(), tmp_path / "report.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(png.read_bytes()[16:20], "big") == 1280 and png.stat().st_size > 50_000  # a page, not a blank
    dom = rendered(run_dir)
    table = dom.by_id("score-table").all("tr")
    header = [th.text.strip() for th in table[0].all("th")]
    table_text = [dict(zip(header, (td.text.strip() for td in tr.all("td")))) for tr in table[1:]]
    for score in final(run_dir)["scores"]:
        row = next(r for r in table_text if [r["Model"], r["Dataset"], r["Metric"]] == [score["model"], "cmds", score["metric"]])
        assert row["Score"] == f"{score['score']:.2f}" and [row["Samples"], row["Failed"]] == [str(COUNT), str(score["num_failed"])]
        assert row["95% CI"] == "[{:.2f}, {:.2f}]".format(*score["ci95"])
    plots = dom.by_id("plots")
    assert len(plots.all("svg", "chart")) == 2 and len(plots.all("svg", "hist")) == 4 + 2  # scores, per-sample, latency
    assert plots.all("rect") and "word_error_rate" in plots.text
    assert len(dom.by_id("sample-rows").all("tr")) == COUNT   # one row per sample, a column per model
    assert [th.text for th in dom.by_id("sample-head").all("th")] == ["Sample", "Reference", "good", "flaky"]
    assert dom.by_id("sample-count").text == f"{COUNT} of {COUNT} samples match"


@pytest.mark.slow
def test_sample_browser_filters_from_the_url(run_dir):
    dom = rendered(run_dir, "#failed=1")
    failed = dom.by_id("sample-rows").all("tr")
    assert len(failed) == 2 and all("failed" in tr.classes for tr in failed)
    assert all("HTTP 400: unsupported audio <b>clip" in tr.text for tr in failed)
    only = rendered(run_dir, "#model=good&dataset=cmds")
    assert [th.text for th in only.by_id("sample-head").all("th")] == ["Sample", "Reference", "good"]
    assert all(len(tr.all("td")) == 3 for tr in only.by_id("sample-rows").all("tr"))
    assert only.by_id("sample-count").text == f"{COUNT} of {COUNT} samples match"
    assert rendered(run_dir, "#model=good&failed=1").by_id("sample-count").text == f"0 of {COUNT} samples match"  # flaky's failures
    ref = demo_rows(COUNT)[5]["reference"]
    found = rendered(run_dir, "#q=" + ref.upper().replace(" ", "%20"))  # case-insensitive text search
    assert len(found.by_id("sample-rows").all("tr")) >= 1 and all(ref in tr.text for tr in found.by_id("sample-rows").all("tr"))
    assert rendered(run_dir, "#q=no-such-text-anywhere").by_id("sample-count").text == f"0 of {COUNT} samples match"


def test_large_runs_embed_a_capped_sample_set_failed_first(run_dir):
    run = load_run(run_dir)
    stats, table = collect(run, max_bytes=2500)
    assert 0 < len(table.rows) < table.total == 2 * COUNT
    assert {r[0] for r in table.rows} == {0, 1}  # every (dataset, model) keeps some rows
    failed_ids = {r[1] for r in table.rows if r[6] is not None}
    assert {"cmd000", "cmd001"} <= failed_ids  # failed samples are the ones worth keeping
    assert sum(len(s.scores["word_error_rate"]) for s in stats) == 2 * COUNT - 2  # plots use every scored sample
    page = run_report(run, stats, table)
    assert f"This page holds {len(table.rows)} of the run's {2 * COUNT} samples" in page


def test_long_texts_are_cut_on_the_page_and_kept_whole_in_records(run_dir):
    dom = rendered(run_dir, "#model=flaky&q=%20la%20la")
    row = dom.by_id("sample-rows").all("tr")
    assert len(row) == 1 and "… [" in row[0].text and "more characters in records/]" in row[0].text
    assert "Texts longer than 2,000 characters are cut here (2 of them)" in dom.by_id("samples").text  # prediction and reply
    stored = [json.loads(line) for line in (run_dir / "records" / "cmds__flaky.jsonl").read_text().splitlines()]
    assert max(len(r["reply"] or "") for r in stored) > 3 * LONG


def test_plot_axes_use_round_ticks_covering_every_value_and_escape_names():
    assert nice_ticks(0, 0.83) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(-3.2, 12.5) == [-5, 0, 5, 10, 15]
    chart = bar_chart([Bar("set<1>", "m&n", 3156.25, 3000.0, 3300.0)], "wer")
    assert ">1000<" in chart and "e+03" not in chart and "set&lt;1&gt;" in chart and "m&amp;n" in chart
    assert ">3156.25 [3000.00, 3300.00]<" in chart
    assert "all 0 · n = 12" in histogram([0.0] * 12, "one value")  # no invented range around a single value


def with_optional_fields(run_dir, tmp_path):
    """The run's directory, with final_scores.json carrying intervals, subsets, repeats and comparisons."""
    copy = tmp_path / "rich"
    shutil.copytree(run_dir, copy)
    data = final(copy)
    for s in data["scores"]:
        s.update(ci95=[s["score"] - 2.5, s["score"] + 1.25], stderr=0.75)
        s["details"].update(subsets={"accent <us>": {"score": 12.345, "num_samples": 7}}, repeats=5, std=0.5)
    data["comparisons"] = [{"dataset": "cmds", "metric": "accuracy", "model_a": "good", "model_b": "flaky",
                            "difference": 12.5, "ci95": [3.0, 21.0], "p_value": 0.0123}]
    (copy / "final_scores.json").write_text(json.dumps(data))
    render_run(copy)
    return copy, data


def test_intervals_subsets_and_comparisons_are_shown_when_present(run_dir, tmp_path):
    copy, data = with_optional_fields(run_dir, tmp_path)
    dom = rendered(copy)
    header = [th.text for th in dom.by_id("score-table").all("th")]
    assert header[3:6] == ["Score", "95% CI", "Stderr"]
    first = data["scores"][0]
    cells = [td.text.strip() for td in dom.by_id("score-table").all("tr")[1].all("td")]
    assert cells[3].startswith(f"{first['score']:.2f}") and "sd 0.50 over 5 repeats" in cells[3]
    assert cells[4] == f"[{first['score'] - 2.5:.2f}, {first['score'] + 1.25:.2f}]" and cells[5] == "0.75"
    assert [td.text.strip() for td in dom.by_id("score-table").all("tr", "subset")[0].all("td")][1:4] == ["↳ accent <us>", "", "12.35"]
    comparisons = dom.by_id("comparisons").text
    assert "12.50" in comparisons and "[3.00, 21.00]" in comparisons and "0.012" in comparisons
    assert len(dom.by_id("plots").all("path", "whisker")) == len(data["scores"])
    rows = list(csv.DictReader((copy / "results.csv").open()))
    assert float(rows[0]["ci_low"]) == pytest.approx(first["score"] - 2.5) and rows[0]["stderr"] == "0.75"
    assert rows[1]["subset"] == "accent <us>" and rows[1]["score"] == "12.345"


def slow_reply(rows):
    return lambda seen, n: Reply(payload=chat_payload("turn on the light"), delay=0.1)


def test_interrupted_run_reports_are_marked_partial(tmp_path):
    ws = Workspace(tmp_path)
    rows = ws.copy_demo_audio(demo_rows(30))
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id"}})
    with ScriptedEndpoint(slow_reply(rows)) as ep:
        config = ws.config([model(ep.url, batch_size=2)], [["cmds", "word_error_rate"]], output_dir=str(tmp_path / "runs"))
        proc = subprocess.Popen([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "cut", "--no-cache"],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while len(ep.requests) < 4:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 130
    run_dir = tmp_path / "runs" / "cut"
    assert final(run_dir)["interrupted"] is True
    dom = rendered(run_dir)
    assert "Partial results." in dom.all("div", "partial")[0].text
    assert [b.text for b in dom.by_id("score-table").all("span", "partial")] == ["partial"]
    assert next(csv.DictReader((run_dir / "results.csv").open()))["partial"] == "true"
    assert "(partial)" in (run_dir / "results.md").read_text()


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "lalmeval", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def silent(rows):
    """Both models answer nothing: every sample has a WER of 100%."""
    return lambda seen, n: ""


def test_report_command_ranks_models_across_runs_and_keeps_them_apart(run_dir, tmp_path):
    second, _ = make_run(Workspace(tmp_path / "w2"), "r2", silent, count=4)
    out = cli("report", str(run_dir), str(second), "--out", "board/leaderboard.html", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("│ ")]
    labels = [line.split("│")[2].strip() for line in lines[1:]]
    # Mean rank over WER and accuracy: good r1 (1, 1); both r2 models (2, 2), tied and so by name; flaky r1, whose
    # 1500-word reply puts its WER last (4, 2). The same model names stay apart by run.
    assert labels == ["good (r1)", "flaky (r2)", "good (r2)", "flaky (r1)"]
    assert "100.00" in lines[1] and "Leaderboard: board/leaderboard.html" in out.stdout
    dom = parse(dump_dom((tmp_path / "board" / "leaderboard.html").as_uri()))
    board = dom.by_id("leaderboard")
    assert [tr.all("td")[1].text for tr in board.all("tr")[1:]] == labels
    links = [a.attrs["href"] for a in dom.all("a")]
    assert links == [os.path.relpath(d / "report.html", tmp_path / "board") for d in (run_dir, second)]
    assert all((tmp_path / "board" / link).is_file() for link in links)
    assert len(dom.all("svg", "chart")) == 2


@pytest.mark.parametrize("name, make, reason", [
    ("missing", lambda path: None, "no such run directory"),
    ("empty", lambda path: path.mkdir(), "no final_scores.json (not a run directory, or a run that was never scored)"),
])
def test_report_command_names_a_bad_run_dir_in_one_line(run_dir, tmp_path, name, make, reason):
    bad = tmp_path / name
    make(bad)
    out = cli("report", str(run_dir), str(bad), cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [f"error: {bad}: {reason}"]
    assert not (tmp_path / "leaderboard.html").exists()


def answer(seen, n):
    return f"answer {seen.text.split()[-1]}"


def test_report_html_keeps_every_repeat_and_shows_a_failed_repeat(ws):
    """`repeat_runs: 3` on two samples; q0's first request fails (HTTP 400) while the others succeed a
    little later. The report used to keep the last record *per sample id*: 2 of the 6 records, q0's
    failed repeat replaced by a later successful one, 0 failed on the page while final_scores.json
    said 1. Now: one row per (sample, repeat), the failed repeat among them, listed by id then repeat."""
    ws.text_questions(2)
    first_q0 = []

    def handler(seen, n):
        if seen.text.endswith("question 0") and not first_q0:
            first_q0.append(n)
            return Reply(status=400, payload={"error": {"message": "bad request"}})
        return Reply(payload=chat_payload(answer(seen, n)), delay=0.2)

    with ScriptedEndpoint(handler) as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"), repeat_runs=3)
        ws.run()
    run_dir = ws.root / "runs" / "t"
    assert final(run_dir)["scores"][0]["num_failed"] == 1
    stats, table = collect(load_run(run_dir))
    assert (stats[0].failed, len(table.rows)) == (1, 6), f"report.html: {stats[0].failed} failed, {len(table.rows)} rows of 6 records"
    assert [(row[1], row[9]) for row in table.rows] == [(f"q{i}", r) for i in range(2) for r in range(3)]
    assert stats[0].scores["accuracy"] == [1.0] * 5  # every scored repeat, none twice
    dom = rendered(run_dir, "#failed=1")
    [failed] = dom.by_id("sample-rows").all("tr")
    assert failed.all("div", "sid")[0].text.startswith("q0 · repeat ") and "HTTP 400" in failed.text


def test_a_full_disk_while_writing_report_html_is_a_warning_and_leaves_no_temporary_file(ws):
    """The disk takes records, scores and final_scores.json but not report.html (the largest file).
    The run used to exit 0 with `report.html.tmp` left behind and no results.csv / results.md."""
    ws.text_questions(2)
    with ScriptedEndpoint(answer) as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(ws.root / "config.yaml"), "--run-id", "r"],
                             cwd=REPO, capture_output=True, text=True, timeout=120, preexec_fn=limit_file_size(10_000))
    assert out.returncode == 0, out.stderr  # the scores stand (README: a report that cannot be written is a warning)
    assert "warning: report.html not written (cannot write " in out.stderr and "report.html: File too large" in out.stderr
    run_dir = ws.root / "runs" / "r"
    assert sorted(p.name for p in run_dir.iterdir() if p.is_file()) == [".lock", "config.yaml", "final_scores.json", "results.csv", "results.md"]


def test_the_report_command_on_a_full_disk_is_one_line_and_exit_4(run_dir, tmp_path):
    out = subprocess.run([sys.executable, "-m", "lalmeval", "report", str(run_dir), "--out", "board.html"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
                         preexec_fn=limit_file_size(1000))
    assert out.returncode == 4 and out.stderr.strip().splitlines() == ["error: cannot write board.html: File too large"], out.stderr
    assert not list(tmp_path.iterdir())


CLIPPED = """<script>
window.addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("svg").forEach(function (svg) {
    var box = svg.viewBox.baseVal;
    svg.querySelectorAll("text").forEach(function (t) {
      var b = t.getBBox();
      if (b.x < -0.5 || b.x + b.width > box.width + 0.5 || b.y < -0.5) out.push(t.textContent);
    });
  });
  var pre = document.createElement("pre"); pre.id = "clipped"; pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


def clipped_texts(report):
    """The texts of report.html's plots that Chromium draws (partly) outside their plot."""
    probe = report.with_name("probe.html")
    probe.write_text(report.read_text().replace("</body>", CLIPPED + "</body>"))
    return json.loads(parse(dump_dom(probe.as_uri())).by_id("clipped").text)


def test_plot_titles_labels_and_values_are_never_cut_off(ws, run_dir, tmp_path):
    """Long dataset and model names, wide letters, large values with intervals: the per-sample histograms'
    titles used to run past their 280 px (and latency titles past 380 px), cut off mid-word."""
    ws.text_questions(12, name="spoken_squad_long_questions_test")

    def handler(seen, n):
        i = int(seen.text.split()[-1])
        return Reply(status=400, payload={"error": {"message": "no"}}) if i == 0 else f"answer {i}" + " more words" * (i % 3)

    with ScriptedEndpoint(handler) as ep:
        ws.config([model(ep.url, name="Qwen2-Audio-7B-Instruct-long-name", retry_attempts=0),
                   model(ep.url, name="WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW", retry_attempts=0)],
                  [["spoken_squad_long_questions_test", "word_error_rate"], ["spoken_squad_long_questions_test", "accuracy"]])
        ws.run("long")
    report = ws.root / "runs" / "long" / "report.html"
    page = report.read_text()
    assert "<title>spoken_squad_long_questions_test · word_error_rate · WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW</title>" in page
    assert clipped_texts(report) == []
    rich, _ = with_optional_fields(run_dir, tmp_path)  # intervals, and flaky's word error rate in the thousands
    assert clipped_texts(rich / "report.html") == []
