"""The side-by-side samples section of the leaderboard page: its markup, style and script (one page of rows in the DOM at a time)."""

from __future__ import annotations

from typing import Any

from lalmeval.reports.html import script_json

PAGE_ROWS = 50

CSS = """
#runs-browser .rb-controls{display:flex;flex-wrap:wrap;gap:.5em 1em;align-items:center;margin:.5em 0}
#runs-browser .rb-scroll{overflow-x:auto}
#runs-browser table{width:100%}
#runs-browser td{vertical-align:top;word-wrap:break-word;font-size:13px;min-width:14em;max-width:28em}
#runs-browser td.rb-id{width:11em}
#runs-browser del{background:#fdd;color:#900;text-decoration:line-through}
#runs-browser ins{background:#dfd;color:#060;text-decoration:none}
#runs-browser del.sub{background:#fec}
#runs-browser ins.sub{background:#cef;color:#036}
#runs-browser .rb-scores{color:#555;font-size:12px;margin-top:.3em}
#runs-browser .rb-failed{color:#900}
#runs-browser .rb-missing{color:#999}
"""

JS = r"""
(function(){
const D = JSON.parse(document.getElementById('runs-data').textContent);
const S = D.strings, R = D.rows, N = R.id.length, C = D.columns.length, PAGE = %PAGE%;
const $ = id => document.getElementById(id);
let order = [], page = 0;
const esc = t => String(t).replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
const text = i => i === null || i === undefined ? null : S[i];
function option(sel, value, label){ const o = document.createElement('option'); o.value = value; o.textContent = label; sel.appendChild(o); }
function setup(){
  option($('rb-dataset'), '-1', 'all datasets');
  D.datasets.forEach((d, i) => option($('rb-dataset'), String(i), d.name));
  option($('rb-sort'), '', 'sample id');
  D.datasets.forEach((d, di) => d.metrics.forEach((m, k) => {
    option($('rb-metric'), di + '|' + k, d.name + ' · ' + m + (d.lower[k] ? ' ↓' : ' ↑'));
    for (let c = 0; c < C; c++) option($('rb-sort'), c + '|' + di + '|' + k, D.columns[c] + ' · ' + d.name + ' · ' + m);
  }));
  D.columns.forEach((c, i) => { option($('rb-a'), String(i), c); option($('rb-b'), String(i), c); });
  if (C > 1) $('rb-b').value = '1';
  fromHash();
  ['rb-dataset','rb-sort','rb-worst','rb-filter','rb-a','rb-b','rb-metric'].forEach(id => $(id).addEventListener('change', compute));
  $('rb-search').addEventListener('input', compute);
  $('rb-prev').addEventListener('click', () => { if (page > 0) { page--; render(); } });
  $('rb-next').addEventListener('click', () => { if ((page + 1) * PAGE < order.length) { page++; render(); } });
  $('rb-head').innerHTML = '<tr><th>Sample</th><th>Reference</th>' + D.columns.map(c => '<th>' + esc(c) + '</th>').join('') + '</tr>';
  compute();
}
// #rb:filter=worse&a=0&b=1&metric=0|0&sort=0|0|0&worst=1&dataset=0&q=s1 opens the browser in that state (a link to share).
function fromHash(){
  if (!location.hash.startsWith('#rb:')) return;
  const ids = {dataset: 'rb-dataset', sort: 'rb-sort', filter: 'rb-filter', a: 'rb-a', b: 'rb-b', metric: 'rb-metric', q: 'rb-search'};
  new URLSearchParams(location.hash.slice(4)).forEach((value, key) => {
    if (key === 'worst') $('rb-worst').checked = value !== '0';
    else if (ids[key]) $(ids[key]).value = value;
  });
  setTimeout(() => $('runs-browser').scrollIntoView(), 0);
}
function score(c, r, k){ const s = D.scores[c][r]; return s ? s[k] : null; }
function worse(lower, a, b){ return lower ? a > b : a < b; }
function changed(r){
  let seen = null;
  for (let c = 0; c < C; c++) {
    if (D.scores[c][r] === null && D.pred[c][r] === null) continue;
    const key = D.pred[c][r] + '/' + D.failed[c][r] + '/' + JSON.stringify(D.scores[c][r]);
    if (seen === null) seen = key; else if (key !== seen) return true;
  }
  return false;
}
function compute(){
  const ds = +$('rb-dataset').value, filter = $('rb-filter').value, q = $('rb-search').value.trim();
  const [md, mk] = $('rb-metric').value.split('|').map(Number), a = +$('rb-a').value, b = +$('rb-b').value;
  const lower = D.datasets[md] ? D.datasets[md].lower[mk] : false;
  const out = [];
  for (let r = 0; r < N; r++) {
    if (ds >= 0 && R.dataset[r] !== ds) continue;
    if (q && R.id[r].indexOf(q) < 0) continue;
    if (filter === 'changed' && !changed(r)) continue;
    if (filter === 'worse') {
      if (R.dataset[r] !== md) continue;
      const sa = score(a, r, mk), sb = score(b, r, mk);
      if (sa === null || sb === null || !worse(lower, sa, sb)) continue;
    }
    out.push(r);
  }
  const key = $('rb-sort').value;
  if (key) {
    const [c, d, k] = key.split('|').map(Number), low = D.datasets[d].lower[k], first = $('rb-worst').checked;
    const value = r => R.dataset[r] === d ? score(c, r, k) : null;
    out.sort((x, y) => {
      const vx = value(x), vy = value(y);
      if (vx === null || vy === null) return (vx === null) - (vy === null) || x - y;
      const worstFirst = low ? vy - vx : vx - vy;
      return (first ? worstFirst : -worstFirst) || x - y;
    });
  }
  order = out; page = 0; render();
}
function norm(w){ return w.toLowerCase().replace(/[^\p{L}\p{N}']/gu, ''); }
function diff(ref, hyp){
  const a = ref.split(/\s+/).filter(Boolean), b = hyp.split(/\s+/).filter(Boolean), n = a.length, m = b.length;
  if (n * m > 400000) return esc(hyp);
  const ka = a.map(norm), kb = b.map(norm), w = m + 1, dp = new Uint32Array((n + 1) * w);
  for (let i = 0; i <= n; i++) dp[i * w] = i;
  for (let j = 0; j <= m; j++) dp[j] = j;
  for (let i = 1; i <= n; i++) for (let j = 1; j <= m; j++)
    dp[i * w + j] = Math.min(dp[(i - 1) * w + j - 1] + (ka[i - 1] === kb[j - 1] ? 0 : 1), dp[(i - 1) * w + j] + 1, dp[i * w + j - 1] + 1);
  const ops = [];
  let i = n, j = m;
  while (i > 0 || j > 0) {
    if (i > 0 && j > 0 && dp[i * w + j] === dp[(i - 1) * w + j - 1] + (ka[i - 1] === kb[j - 1] ? 0 : 1)) {
      ops.push(ka[i - 1] === kb[j - 1] ? esc(b[j - 1]) : '<del class="sub" title="substitution">' + esc(a[i - 1]) + '</del>\u2009<ins class="sub">' + esc(b[j - 1]) + '</ins>');
      i--; j--;
    } else if (i > 0 && dp[i * w + j] === dp[(i - 1) * w + j] + 1) { ops.push('<del title="deletion">' + esc(a[i - 1]) + '</del>'); i--; }
    else { ops.push('<ins title="insertion">' + esc(b[j - 1]) + '</ins>'); j--; }
  }
  return ops.reverse().join(' ');
}
function fmt(v){ return v === null || v === undefined ? 'n/a' : (Math.round(v * 100) / 100).toString(); }
function cell(c, r){
  const p = text(D.pred[c][r]), s = D.scores[c][r], ref = text(R.ref[r]);
  if (p === null && s === null && !D.failed[c][r]) return '<td class="rb-missing">not in this run</td>';
  const body = D.failed[c][r] ? '<div class="rb-failed">failed</div>' : (ref !== null && p !== null ? diff(ref, p) : esc(p === null ? '' : p));
  const metrics = D.datasets[R.dataset[r]].metrics;
  return '<td><div class="diff">' + body + '</div><div class="rb-scores">' + metrics.map((m, k) => esc(m) + ' ' + fmt(s ? s[k] : null)).join(' · ') + '</div></td>';
}
function player(r){
  const i = R.clip[r];
  if (i === null || !D.clips[i] || D.clips[i].file === null) return '';
  return ' <button class="rb-play" data-clip="' + i + '" title="' + esc(D.clips[i].name) + '">▶</button>';
}
function render(){
  const rows = order.slice(page * PAGE, (page + 1) * PAGE);
  $('rb-body').innerHTML = rows.map(r => '<tr data-row="' + r + '"><td class="rb-id">' + esc(D.datasets[R.dataset[r]].name) + '<br><b>' + esc(R.id[r]) + '</b>'
    + (R.repeat[r] ? ' (repeat ' + R.repeat[r] + ')' : '') + player(r) + '</td><td>' + esc(text(R.ref[r]) || '') + '</td>'
    + D.columns.map((_, c) => cell(c, r)).join('') + '</tr>').join('');
  const from = order.length ? page * PAGE + 1 : 0, to = Math.min(order.length, (page + 1) * PAGE);
  $('rb-pager').textContent = 'rows ' + from + '–' + to + ' of ' + order.length + ' (of ' + N + ' samples)';
}
document.addEventListener('click', e => {
  const btn = e.target.closest && e.target.closest('.rb-play');
  if (!btn) return;
  const clip = D.clips[+btn.dataset.clip], file = D.files[clip.file], audio = document.createElement('audio');
  audio.controls = true;
  audio.src = file.src + (clip.span ? '#t=' + clip.span[0] + ',' + clip.span[1] : '');
  btn.replaceWith(audio);
  audio.play().catch(() => {});
});
setup();
})();
"""


def section(data: dict[str, Any]) -> str:
    """The Samples heading, its controls, an empty table the script fills page by page, and the data."""
    controls = (
        '<div class="rb-controls">'
        '<label>Dataset <select id="rb-dataset"></select></label>'
        '<label>Sort by <select id="rb-sort"></select></label><label><input type="checkbox" id="rb-worst" checked> worst first</label>'
        '<label>Show <select id="rb-filter"><option value="">every sample</option><option value="changed">changed between runs</option>'
        '<option value="worse">A worse than B</option></select></label>'
        '<label>A <select id="rb-a"></select></label><label>B <select id="rb-b"></select></label><label>on <select id="rb-metric"></select></label>'
        '<label>Sample id <input id="rb-search" size="12"></label></div>'
        '<div class="rb-controls"><button id="rb-prev">◀ previous</button><span id="rb-pager"></span><button id="rb-next">next ▶</button></div>')
    legend = ('<p class="small">Each prediction against the reference, word by word: <del>deleted</del>, <ins>inserted</ins>, '
              '<del class="sub">substituted</del> <ins class="sub">by</ins> (case and punctuation ignored). ↓ lower is better, ↑ higher is better.</p>')
    return (f'<section id="runs-browser"><h2>Samples side by side</h2>{legend}{controls}'
            '<div class="rb-scroll"><table><thead id="rb-head"></thead><tbody id="rb-body"></tbody></table></div></section>'
            f'<style>{CSS}</style><script type="application/json" id="runs-data">{script_json(data)}</script>'
            f"<script>{JS.replace('%PAGE%', str(PAGE_ROWS))}</script>")
