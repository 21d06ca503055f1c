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
#sample-table td { font-size: 13px; } #sample-table td.scores b { font-variant-numeric: tabular-nums; }
#sample-table th:nth-child(1) { width: 15%; } #sample-table th:nth-child(2) { width: 14%; } #sample-table th:nth-child(3) { width: 24%; }
#sample-table th:nth-child(4) { width: 27%; } #sample-table th:nth-child(5) { width: 20%; }
#sample-table { table-layout: fixed; }
#sample-table tr.failed td:first-child { box-shadow: inset 3px 0 0 var(--bad); }
.note { color: var(--warn); background: var(--warn-bg); padding: 6px 10px; border-radius: 6px; font-size: 13px; }
.legend span { display: inline-block; margin-right: 14px; font-size: 12.5px; }
.legend i { display: inline-block; width: 11px; height: 11px; margin-right: 5px; vertical-align: -1px; border-radius: 2px; }
"""

# Replies are untrusted text: the script only ever sets textContent, never HTML.
BROWSER_JS = r"""
(function () {
  "use strict";
  var source = document.getElementById("samples-data");
  if (!source) return;
  var data = JSON.parse(source.textContent);
  var S = data.strings, G = data.groups, rows = data.rows, PAGE = 50, page = 1, hay = [];
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
  fill(dataset, unique("dataset"));
  fill(model, unique("model"));
  function haystack(i) {
    if (hay[i] === undefined) {
      var r = rows[i];
      hay[i] = [r[1], str(r[2]), str(r[3]), str(r[4]), str(r[5]), str(r[6])].join("\n").toLowerCase();
    }
    return hay[i];
  }
  function matching() {
    var q = text.value.trim().toLowerCase(), out = [];
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i], g = G[r[0]];
      if (dataset.value && g.dataset !== dataset.value) continue;
      if (model.value && g.model !== model.value) continue;
      if (failed.checked && r[6] === null) continue;
      if (q && haystack(i).indexOf(q) < 0) continue;
      out.push(r);
    }
    return out;
  }
  function textCell(value, cls) {
    var td = node("td", cls);
    if (value !== null) td.appendChild(node("div", "text", value));
    return td;
  }
  function folded(label, value) {
    var d = node("details");
    d.appendChild(node("summary", null, label));
    d.appendChild(node("div", "text", value));
    return d;
  }
  function sampleRow(r) {
    var g = G[r[0]], tr = node("tr", r[6] === null ? "sample" : "sample failed");
    var first = node("td");
    first.appendChild(node("div", "sid", r[9] === null || r[9] === undefined ? r[1] : r[1] + " \u00b7 repeat " + r[9]));
    first.appendChild(node("div", "small", g.dataset + " \u00b7 " + g.model + (r[8] === null ? "" : " \u00b7 " + r[8].toFixed(2) + " s")));
    if (str(r[2])) first.appendChild(folded("prompt", str(r[2])));
    tr.appendChild(first);
    var scores = node("td", "scores");
    g.metrics.forEach(function (m, k) {
      var v = r[7][k];
      var line = node("div", null, m + " ");
      line.appendChild(node("b", null, v === null ? "\u2013" : v.toFixed(2)));
      scores.appendChild(line);
    });
    tr.appendChild(scores);
    tr.appendChild(textCell(str(r[3])));
    var pred = textCell(str(r[4]));
    if (r[5] !== null && r[5] !== r[4]) pred.appendChild(folded("raw reply", str(r[5])));
    tr.appendChild(pred);
    tr.appendChild(textCell(str(r[6]), "reason"));
    return tr;
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
    var found = matching(), pages = Math.max(1, Math.ceil(found.length / PAGE));
    page = Math.min(Math.max(page, 1), pages);
    var body = $("sample-rows");
    body.textContent = "";
    found.slice((page - 1) * PAGE, page * PAGE).forEach(function (r) { body.appendChild(sampleRow(r)); });
    $("sample-count").textContent = found.length + " of " + rows.length + " samples match";
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
