"""report.html as a reader uses it: settings per model, audio players, answers side by side, natural id
order, the console naming the page, and leaderboards that say when they compare unlike things."""

import hashlib
import json
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import soundfile as sf

from lalmeval.reports import load_run, render_run
from lalmeval.reports.html import run_report
from lalmeval.reports.order import natural_key
from lalmeval.reports.samples import collect
from lalmeval.results.clips import ClipKeeper
from lalmeval.results.store import write_atomic
from tests.support.browser import dump_dom, parse
from tests.support.endpoint import Reply, ScriptedEndpoint, answer_by_number
from tests.support.workspace import DEMO, REPO, Workspace, demo_rows, model

# Plays every player of the page's first rows far enough to know the clip: its length and where it starts.
PLAY = """<script>
window.addEventListener("load", function () {
  var audio = Array.prototype.slice.call(document.querySelectorAll("#sample-rows audio"), 0, 3), out = [], left = audio.length;
  function done() { var pre = document.createElement("pre"); pre.id = "played"; pre.textContent = JSON.stringify(out); document.body.appendChild(pre); }
  if (!left) done();
  audio.forEach(function (a, i) {
    a.addEventListener("loadedmetadata", function () { out[i] = {duration: a.duration, start: a.currentTime}; if (!--left) done(); });
    a.addEventListener("error", function () { out[i] = {error: a.error && a.error.code}; if (!--left) done(); });
    a.preload = "metadata"; a.load();
  });
});
</script>"""


def page(run_dir, query=""):
    return parse(dump_dom((run_dir / "report.html").as_uri() + query))


def played(run_dir):
    """What Chromium reads from the first players of the page: [{duration, start}] or [{error}]."""
    report = run_dir / "report.html"
    probe = run_dir / "probe.html"
    probe.write_text(report.read_text().replace("</body>", PLAY + "</body>"))
    # Players load their clips' headers from disk: a busy machine needs more of the page's time than a page's scripts do.
    return json.loads(parse(dump_dom(probe.as_uri(), budget_ms=15000)).by_id("played").text)


def seconds(path):
    info = sf.info(str(path))
    return info.frames / info.samplerate


def speech_run(ws, rows, run_id="a", **spec):
    """Two models on spoken commands: 'good' says the reference, 'short' drops its last word."""
    ws.runspec("asr", "commands", {"cmds": {"hf_repo": ws.jsonl(rows), "id_column": "id", **spec}})
    with ScriptedEndpoint(lambda seen, n: "what is the weather" if seen.body["model"] == "short" else "what is the weather today") as ep:
        ws.config([model(ep.url, name="good", model="good"), model(ep.url, name="short", model="short", temperature=0.3, max_tokens=64)],
                  [["cmds", "word_error_rate"]])
        ws.run(run_id)
    return ws.root / "runs" / run_id


def test_every_sample_has_a_player_of_its_clip_embedded_in_a_small_run(ws):
    rows = ws.copy_demo_audio(demo_rows(3))
    run_dir = speech_run(ws, rows)
    dom = page(run_dir)
    links = [a for a in dom.by_id("sample-rows").all("a", "file")]
    assert [a.text for a in links] == [str(ws.root / "data" / r["audio"]) for r in rows]   # the file, named
    assert all(a.attrs["href"].startswith("data:audio/flac;base64,") for a in links)          # embedded: the page stands alone
    assert "embedded in this page" in dom.by_id("samples").text
    assert [round(p["duration"], 2) for p in played(run_dir)] == [round(seconds(ws.root / "data" / r["audio"]), 2) for r in rows]


def test_a_large_run_links_its_clips_by_relative_path_and_they_still_play(ws):
    rows = ws.copy_demo_audio(demo_rows(3))
    run_dir = speech_run(ws, rows)
    run = load_run(run_dir)
    write_atomic(run_dir / "report.html", run_report(run, *collect(run, audio_bytes=1000)))   # over 1,000 bytes: not small
    dom = page(run_dir)
    hrefs = [a.attrs["href"] for a in dom.by_id("sample-rows").all("a", "file")]
    assert hrefs == [f"../../data/{r['audio']}" for r in rows]
    assert "linked, not embedded" in dom.by_id("samples").text
    assert [round(p["duration"], 2) for p in played(run_dir)] == [round(seconds(ws.root / "data" / r["audio"]), 2) for r in rows]


def test_a_clip_cut_from_a_longer_file_plays_from_its_start(ws):
    rows = [{**r, "audio": {"path": r["audio"], "start": 0.5, "end": 1.25}} for r in ws.copy_demo_audio(demo_rows(2))]
    run_dir = speech_run(ws, rows)
    dom = page(run_dir)
    assert "from 0.5 s to 1.25 s" in dom.by_id("sample-rows").text
    assert [p["start"] for p in played(run_dir)] == [0.5, 0.5]


def test_audio_held_in_the_data_is_kept_beside_the_run_and_plays(ws):
    rows = demo_rows(3)
    table = [{"audio": {"bytes": (DEMO / r["audio"]).read_bytes(), "path": None}, "reference": r["reference"], "id": r["id"]} for r in rows]
    (ws.root / "data").mkdir()
    pq.write_table(pa.Table.from_pylist(table), ws.root / "data" / "set.parquet")
    run_dir = speech_run(ws, [], target_column="reference", hf_repo="data/set.parquet")
    kept = sorted(p.name for p in (run_dir / "audio").iterdir())
    assert len(kept) == 3 and all(name.endswith(".flac") for name in kept)     # one copy per clip, shared by both models
    records = {r["id"]: r for r in map(json.loads, (run_dir / "records" / "cmds__good.jsonl").read_text().splitlines())}
    first = hashlib.sha1((DEMO / rows[0]["audio"]).read_bytes()).hexdigest()
    assert records[rows[0]["id"]]["extra"]["audio"] == [{"copy": f"audio/{first}.flac"}]
    assert [round(p["duration"], 2) for p in played(run_dir)] == [round(seconds(DEMO / r["audio"]), 2) for r in rows]


def test_copies_stop_at_the_runs_fill_and_the_page_says_so(tmp_path):
    keeper = ClipKeeper(tmp_path, limit=1500)
    assert keeper.keep(b"RIFF" + bytes(996)) == "audio/" + hashlib.sha1(b"RIFF" + bytes(996)).hexdigest() + ".wav"
    assert keeper.keep(b"RIFF" + bytes(996)) is not None   # the same clip again: the copy it has
    assert keeper.keep(b"fLaC" + bytes(996)) is None        # a second 1,000 bytes would pass 1,500
    assert ClipKeeper(tmp_path, limit=1500).keep(b"OggS" + bytes(600)) is None   # a later session counts what is kept


def test_the_models_answers_sit_side_by_side_one_row_per_sample(ws):
    rows = ws.copy_demo_audio(demo_rows(2))
    run_dir = speech_run(ws, rows)
    dom = page(run_dir)
    assert [th.text for th in dom.by_id("sample-head").all("th")] == ["Sample", "Reference", "good", "short"]
    body = dom.by_id("sample-rows").all("tr")
    assert len(body) == 2
    cells = [[td.all("div", "text")[0].text if td.all("div", "text") else "" for td in tr.all("td")[2:]] for tr in body]
    assert cells == [["what is the weather today", "what is the weather"]] * 2


def test_sample_ids_are_in_natural_order(ws):
    ids = ["10", "2", "100", "0", "1", "a10", "a2", "A1"]
    rows = [{"id": i, "question": f"question {n}", "reference": f"answer {n}"} for n, i in enumerate(ids)]
    ws.runspec("qa", "questions", {"qs": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})
    with ScriptedEndpoint(answer_by_number) as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]])
        ws.run("n")
    run_dir = ws.root / "runs" / "n"
    natural = ["0", "1", "2", "10", "100", "A1", "a2", "a10"]
    assert [row[1] for row in collect(load_run(run_dir))[1].rows] == natural
    assert [div.text for div in page(run_dir).by_id("sample-rows").all("div", "sid")] == natural
    assert sorted(["x-9", "x-10", "x-1-b", "x-1-a", "007", "7", "9" * 5000, "8" * 5000], key=natural_key) == \
        ["007", "7", "8" * 5000, "9" * 5000, "x-1-a", "x-1-b", "x-9", "x-10"]


def test_settings_show_each_model_as_configured_and_what_its_requests_carried(ws, tmp_path):
    rows = ws.copy_demo_audio(demo_rows(2))
    run_dir = speech_run(ws, rows)
    dom = page(run_dir)
    settings = {tr.all("td")[0].text: [td.text for td in tr.all("td")[1:]] for tr in dom.by_id("model-settings").all("tr")[1:]}
    assert settings["temperature"] == ["0.0", "0.3"] and settings["max_tokens"] == ["", "64"]
    assert [s.text for s in dom.by_id("model-settings").all("strong")][:2] == ["good", "short"]   # what differs, in bold
    sent = [[td.text for td in tr.all("td")[:3]] for tr in dom.by_id("request-settings").all("tr")[1:]]
    assert sent == [["cmds", "good", '{"temperature": 0.0}'], ["cmds", "short", '{"temperature": 0.3, "max_tokens": 64}']]
    # A protocol printed with the scores (details.protocol) is shown beside them.
    copy = tmp_path / "with-protocol"
    shutil.copytree(run_dir, copy)
    final = json.loads((copy / "final_scores.json").read_text())
    for score in final["scores"]:
        score["details"]["protocol"] = {"name": "kimi", "version": 1}
    (copy / "final_scores.json").write_text(json.dumps(final))
    render_run(copy)
    table = page(copy).by_id("request-settings")
    assert [th.text for th in table.all("th")][-1] == "Protocol" and [tr.all("td")[-1].text for tr in table.all("tr")[1:]] == ["kimi@1"] * 2


def test_the_last_line_a_run_prints_names_its_report(ws):
    ws.text_questions(3)
    with ScriptedEndpoint(lambda seen, n: Reply(status=400, payload={"error": {"message": "no"}}) if n == 0 else answer_by_number(seen, n)) as ep:
        config = ws.config([model(ep.url, retry_attempts=0, batch_size=1)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(config), "--run-id", "last"],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert out.returncode == 3   # a failed sample: the retry hint comes, and the page is still the last word
    assert out.stdout.rstrip("\n").splitlines()[-1] == f"Report: {ws.root / 'runs' / 'last' / 'report.html'}"


def test_a_leaderboard_over_different_datasets_says_so_and_how_it_ranks(tmp_path):
    runs = []
    for name, datasets in (("both", ["qs", "more"]), ("one", ["qs"])):
        ws = Workspace(tmp_path / name)
        rows = [{"id": f"q{i}", "question": f"question {i}", "reference": f"answer {i}"} for i in range(3)]
        ws.runspec("qa", "questions", {d: {"hf_repo": ws.jsonl(rows, f"data/{d}.jsonl"), "id_column": "id", "modality": "text",
                                           "textual_input_column": "question", "audio_column": None} for d in ["qs", "more"]})
        with ScriptedEndpoint(answer_by_number) as ep:
            ws.config([model(ep.url, name=name)], [[d, "accuracy"] for d in datasets])
            ws.run(name)
        runs.append(ws.root / "runs" / name)
    out = subprocess.run([sys.executable, "-m", "lalmeval", "report", *map(str, runs), "--out", str(tmp_path / "board.html")],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    said = [line for line in out.stdout.splitlines() if line.startswith("warning: ")]
    assert said == ["warning: the models were not scored on the same datasets (more accuracy: no score from one (one)). Each is ranked "
                    "by its mean rank over the columns it has a score in, so mean ranks over different columns are not like for like."]
    banner = parse((tmp_path / "board.html").read_text()).all("div", "warning")
    assert len(banner) == 1 and "not scored on the same datasets" in banner[0].text
