"""The stylesheet and the sample-browser script every report inlines (no file is fetched when the page opens)."""

CSS = """
:root { --fg: #1b1f24; --muted: #5b6470; --line: #d8dde3; --bg-alt: #f5f7f9; --warn: #8a4b00; --warn-bg: #fff3dc;
        --bad: #a3141b; --bad-bg: #fdecec; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1200px; padding: 24px 28px 60px; color: var(--fg); background: #fff;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 34px 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 8px; }
.meta { color: var(--muted); font-size: 12.5px; margin: 0 0 12px; }
nav { margin: 10px 0 0; font-size: 13px; } nav a { color: var(--accent); margin-right: 14px; text-decoration: none; }
.banner { padding: 10px 14px; border-radius: 6px; margin: 12px 0; border: 1px solid; }
.banner.partial { color: var(--warn); background: var(--warn-bg); border-color: #f0c36d; }
.banner.down { color: var(--bad); background: var(--bad-bg); border-color: #f1a9ac; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 10px; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg-alt); font-weight: 600; font-size: 12.5px; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.score { font-weight: 600; }
tr.subset td { color: var(--muted); font-size: 13px; } tr.subset td:first-child { padding-left: 24px; }
span.best { background: #d9f0df; font-weight: 700; padding: 1px 4px; border-radius: 4px; }
.badge { display: inline-block; font-size: 11px; font-weight: 600; padding: 0 6px; border-radius: 9px; margin-left: 6px;
         vertical-align: 1px; }
.badge.partial { color: var(--warn); background: var(--warn-bg); border: 1px solid #f0c36d; }
.badge.failed { color: var(--bad); background: var(--bad-bg); border: 1px solid #f1a9ac; }
.small { font-size: 12px; color: var(--muted); }
details > summary { cursor: pointer; color: var(--accent); font-size: 12.5px; }
pre, .text { white-space: pre-wrap; word-break: break-word; overflow-wrap: anywhere; margin: 0;
      font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.text { max-height: 14em; overflow: auto; }
.reason { color: var(--bad); }
.plots { display: flex; flex-wrap: wrap; gap: 14px 22px; align-items: flex-start; }
svg { max-width: 100%; height: auto; }
.controls { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin: 8px 0; padding: 10px;
            background: var(--bg-alt); border: 1px solid var(--line); border-radius: 6px; }
.controls input[type=search] { flex: 1 1 260px; padding: 5px 8px; font-size: 14px; }
.controls select { padding: 4px; font-size: 13px; max-width: 220px; }
.pager { display: flex; gap: 8px; align-items: center; margin: 8px 0; }
.pager button { padding: 3px 10px; }
#sample-table td { font-size: 13px; } #sample-table .scores b { font-variant-numeric: tabular-nums; }
#sample-table { table-layout: fixed; }
#sample-table th:nth-child(1) { width: 22%; } #sample-table th:nth-child(2) { width: 20%; }
#sample-table.models-1 th:nth-child(1) { width: 26%; } #sample-table.models-1 th:nth-child(2) { width: 30%; }
#sample-table tr.failed td:first-child { box-shadow: inset 3px 0 0 var(--bad); }
#sample-table td.answer.failed { background: var(--bad-bg); }
#sample-table .scores { margin-bottom: 4px; } #sample-table .scores .score { margin-right: 10px; }
#sample-table .sid { font-weight: 600; word-break: break-all; }
.clip { margin: 6px 0; } .clip audio { width: 100%; height: 32px; display: block; }
.clip a.file { font-size: 11.5px; color: var(--accent); word-break: break-all; }
.note { color: var(--warn); background: var(--warn-bg); padding: 6px 10px; border-radius: 6px; font-size: 13px; }
.mono { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
#model-settings td:first-child { color: var(--muted); white-space: nowrap; width: 1%; }
#request-settings td { font-size: 13px; }
.legend span { display: inline-block; margin-right: 14px; font-size: 12.5px; }
.legend i { display: inline-block; width: 11px; height: 11px; margin-right: 5px; vertical-align: -1px; border-radius: 2px; }
"""

# Replies are untrusted text: the script only ever sets textContent, never HTML. Audio sources are
# data: URIs built here or percent-encoded relative paths (no scheme can hide in them).
BROWSER_JS = r"""
(function () {
  "use strict";
  var source = document.getElementById("samples-data");
  if (!source) return;
  var data = JSON.parse(source.textContent);
  var S = data.strings, G = data.groups, FILES = data.files || [], CLIPS = data.clips || [], PAGE = 50, page = 1;
  var $ = function (id) { return document.getElementById(id); };
  var text = $("f-text"), dataset = $("f-dataset"), model = $("f-model"), failed = $("f-failed");
  function str(i) { return i === null || i === undefined ? null : S[i]; }
  function node(tag, cls, content) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (content !== undefined && content !== null) n.textContent = content;
    return n;
  }
  function fill(select, values) {
    values.forEach(function (v) { var o = node("option", null, v); o.value = v; select.appendChild(o); });
  }
  function unique(key) {
    var seen = [];
    G.forEach(function (g) { if (seen.indexOf(g[key]) < 0) seen.push(g[key]); });
    return seen;
  }
  var MODELS = unique("model");
  fill(dataset, unique("dataset"));
  fill(model, MODELS);
  // One entry per (dataset, sample, repeat): the rows of every model side by side (rows arrive grouped so).
  var samples = [];
  data.rows.forEach(function (r) {
    var g = G[r[0]], last = samples[samples.length - 1];
    if (!last || last.dataset !== g.dataset || last.id !== r[1] || last.repeat !== r[9]) {
      last = {dataset: g.dataset, id: r[1], repeat: r[9], by: {}, first: r, hay: null};
      samples.push(last);
    }
    last.by[g.model] = r;
  });
  function shownModels() { return model.value ? [model.value] : MODELS; }
  function haystack(s) {
    if (s.hay === null) {
      var parts = [s.id, str(s.first[3])];
      MODELS.forEach(function (m) { var r = s.by[m]; if (r) parts.push(str(r[2]), str(r[4]), str(r[5]), str(r[6])); });
      s.hay = parts.join("\n").toLowerCase();
    }
    return s.hay;
  }
  function matching() {
    var q = text.value.trim().toLowerCase(), models = shownModels(), out = [];
    samples.forEach(function (s) {
      if (dataset.value && s.dataset !== dataset.value) return;
      var rows = models.map(function (m) { return s.by[m]; }).filter(function (r) { return r; });
      if (!rows.length) return;
      if (failed.checked && !rows.some(function (r) { return r[6] !== null; })) return;
      if (q && haystack(s).indexOf(q) < 0) return;
      out.push(s);
    });
    return out;
  }
  function textBlock(value, cls) { return node("div", cls ? "text " + cls : "text", value); }
  function folded(label, value) {
    var d = node("details");
    d.appendChild(node("summary", null, label));
    d.appendChild(node("div", "text", value));
    return d;
  }
  function seconds(x) { return (Math.round(x * 100) / 100).toString(); }
  function player(index) {
    var clip = CLIPS[index], box = node("div", "clip");
    if (!clip) return box;
    var file = clip.file === null ? null : FILES[clip.file];
    if (file) {
      var audio = node("audio");
      audio.controls = true;
      audio.preload = "none";
      audio.src = file.src + (clip.span ? "#t=" + clip.span[0] + "," + clip.span[1] : "");
      box.appendChild(audio);
      var link = node("a", "file", clip.name);
      link.href = file.src;
      if (file.src.indexOf("data:") === 0) link.download = file.name;
      box.appendChild(link);
    } else {
      box.appendChild(node("div", "small", clip.name));
    }
    if (clip.span) box.appendChild(node("div", "small", "from " + seconds(clip.span[0]) + " s to " + seconds(clip.span[1]) + " s"));
    return box;
  }
  function sameFor(rows, k) { return rows.every(function (r) { return str(r[k]) === str(rows[0][k]); }); }
  function sampleCell(s, rows) {
    var td = node("td", "sample");
    td.appendChild(node("div", "sid", s.repeat === null || s.repeat === undefined ? s.id : s.id + " \u00b7 repeat " + s.repeat));
    td.appendChild(node("div", "small", s.dataset));
    (s.first[10] || []).forEach(function (i) { td.appendChild(player(i)); });
    if (sameFor(rows, 2) && str(rows[0][2])) td.appendChild(folded("prompt", str(rows[0][2])));
    return td;
  }
  function modelCell(s, m, rows) {
    var r = s.by[m], g, td;
    if (!r) {
      td = node("td", "answer missing");
      td.appendChild(node("div", "small", "not on this page"));
      return td;
    }
    g = G[r[0]];
    td = node("td", r[6] === null ? "answer" : "answer failed");
    var scores = node("div", "scores");
    g.metrics.forEach(function (metric, k) {
      var v = r[7][k], line = node("span", "score", metric + " ");
      line.appendChild(node("b", null, v === null ? "\u2013" : v.toFixed(2)));
      scores.appendChild(line);
    });
    if (r[8] !== null) scores.appendChild(node("span", "small", r[8].toFixed(2) + " s"));
    td.appendChild(scores);
    if (r[12]) {   // a spoken reply: its audio, what the transcriber heard, then its text part below
      if (r[12][0] !== null) td.appendChild(player(r[12][0]));
      td.appendChild(node("div", "small", "heard (transcript of the speech)"));
      td.appendChild(textBlock(r[12][1] === null ? "\u2013" : r[12][1]));
      td.appendChild(node("div", "small", "text part"));
    }
    if (str(r[4]) !== null) td.appendChild(textBlock(str(r[4])));
    if (r[11]) td.appendChild(node("div", "small", "read: " + r[11]));
    if (str(r[5]) !== null && r[5] !== r[4]) td.appendChild(folded("raw reply", str(r[5])));
    if (str(r[6]) !== null) td.appendChild(textBlock(str(r[6]), "reason"));
    if (!sameFor(rows, 2) && str(r[2])) td.appendChild(folded("prompt", str(r[2])));
    return td;
  }
  function sampleRow(s, models) {
    var rows = models.map(function (m) { return s.by[m]; }).filter(function (r) { return r; });
    var bad = rows.some(function (r) { return r[6] !== null; });
    var tr = node("tr", bad ? "sample failed" : "sample");
    tr.appendChild(sampleCell(s, rows));
    var ref = node("td", "reference");
    if (str(s.first[3]) !== null) ref.appendChild(textBlock(str(s.first[3])));
    tr.appendChild(ref);
    models.forEach(function (m) { tr.appendChild(modelCell(s, m, rows)); });
    return tr;
  }
  function header(models) {
    var head = $("sample-head");
    head.textContent = "";
    ["Sample", "Reference"].concat(models).forEach(function (h, i) {
      var th = node("th", i < 2 ? null : "model", h);
      head.appendChild(th);
    });
    $("sample-table").className = "models-" + Math.min(models.length, 4);
  }
  function writeHash() {
    var p = new URLSearchParams();
    if (text.value) p.set("q", text.value);
    if (dataset.value) p.set("dataset", dataset.value);
    if (model.value) p.set("model", model.value);
    if (failed.checked) p.set("failed", "1");
    if (page > 1) p.set("page", String(page));
    var hash = p.toString();
    history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
  }
  function readHash() {
    var raw = location.hash.slice(1);
    if (raw.indexOf("=") < 0) return false;  // a plain anchor such as #scores
    var p = new URLSearchParams(raw);
    text.value = p.get("q") || "";
    dataset.value = p.get("dataset") || "";
    model.value = p.get("model") || "";
    failed.checked = p.get("failed") === "1";
    page = parseInt(p.get("page"), 10) || 1;
    return true;
  }
  function render() {
    var found = matching(), pages = Math.max(1, Math.ceil(found.length / PAGE)), models = shownModels();
    page = Math.min(Math.max(page, 1), pages);
    header(models);
    var body = $("sample-rows");
    body.textContent = "";
    found.slice((page - 1) * PAGE, page * PAGE).forEach(function (s) { body.appendChild(sampleRow(s, models)); });
    $("sample-count").textContent = found.length + " of " + samples.length + " samples match";
    $("page-info").textContent = "page " + page + " of " + pages;
    $("prev").disabled = page <= 1;
    $("next").disabled = page >= pages;
  }
  function changed() { page = 1; writeHash(); render(); }
  [text, dataset, model, failed].forEach(function (c) { c.addEventListener(c === text ? "input" : "change", changed); });
  $("prev").addEventListener("click", function () { page -= 1; writeHash(); render(); });
  $("next").addEventListener("click", function () { page += 1; writeHash(); render(); });
  window.addEventListener("hashchange", function () { if (readHash()) render(); });
  if (readHash()) { render(); $("samples").scrollIntoView(); } else render();
})();
"""
