"""report.html of one run: scores, aggregates, comparisons, failures, plots and a per-sample browser."""

from __future__ import annotations

import json
from html import escape
from typing import Any, Iterable, Optional, Sequence

from lalmeval.reports.assets import BROWSER_JS, CSS
from lalmeval.reports.plots import (
    Scored,
    latency_histograms,
    legend,
    score_charts,
    score_histograms,
)
from lalmeval.reports.rundir import RunDir, ci95, subsets
from lalmeval.reports.samples import (
    MAX_FIELD_CHARS,
    MAX_SAMPLE_BYTES,
    GroupStats,
    SampleTable,
    audio_note,
)
from lalmeval.reports.settings import model_settings, request_settings
from lalmeval.reports.tables import (
    PROTOCOL_HEADER,
    fmt,
    fmt_ci,
    fmt_interval,
    fmt_p,
    group_cell,
    not_run,
    own_number,
    protocol_rows,
    two_number_notes,
)
from lalmeval.results.ledger import NOT_RUN
from lalmeval.results.provenance import cached_answers, provenance_notes

# Keys of a score's details that other columns already show.
_SHOWN_ELSEWHERE = ("failures", "subsets", "protocol", "reading", "lalmeval")


def esc(value: Any) -> str:
    """Text made safe for HTML element content and attribute values."""
    return escape("" if value is None else str(value), quote=True)


def script_json(data: Any) -> str:
    """JSON that can sit inside <script> whatever its strings hold ('</script>' included)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for raw, safe in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, safe)
    return text


def page(title: str, body: str, script: str = "") -> str:
    """A whole self-contained HTML document."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head><body>{body}{script}</body></html>\n")


def table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Iterable[int] = (), row_classes: Optional[list[str]] = None, table_id: str = "") -> str:
    """An HTML table; header texts are escaped here, row cells must already be HTML."""
    numeric = set(numeric)
    head = "".join(f'<th class="num">{esc(h)}</th>' if i in numeric else f"<th>{esc(h)}</th>" for i, h in enumerate(header))
    body = []
    for r, row in enumerate(rows):
        cls = f' class="{row_classes[r]}"' if row_classes and row_classes[r] else ""
        body.append(f"<tr{cls}>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row)) + "</tr>")
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def partial_badge() -> str:
    """The mark on every score of a partial run (interrupted, or a dataset broke off)."""
    return '<span class="badge partial" title="this score covers only the samples the run finished">partial</span>'


def _repeats(details: dict[str, Any]) -> str:
    """'sd 1.20 over 5 repeats' for multiple-choice repeat runs."""
    repeats, std = details.get("repeats"), details.get("std")
    count = len(repeats) if isinstance(repeats, list) else repeats if isinstance(repeats, int) else None
    if count is None and std is None:
        return ""
    parts = ([f"sd {fmt(std)}"] if isinstance(std, (int, float)) else []) + ([f"{count} repeats"] if count is not None else [])
    return f'<div class="small">{esc(" over ".join(parts))}</div>'


def _details_cell(details: dict[str, Any]) -> str:
    rest = {k: v for k, v in details.items() if k not in _SHOWN_ELSEWHERE}
    if not rest:
        return ""
    return f"<details><summary>{len(rest)} fields</summary><pre>{esc(json.dumps(rest, indent=1, ensure_ascii=False))}</pre></details>"


def _own_cell(details: dict[str, Any]) -> str:
    """lalmeval's own number beside a score printed as a peer prints it, the step between them as its title."""
    own = own_number(details)
    if own is None:
        return ""
    why = own.get("differs_by") or "the same to two decimals"
    return f'<span class="own" title="{esc(str(own.get("score_is")) + "; " + why)}">{esc(fmt(own.get("score")))}</span>'


def _interval_cells(score: dict[str, Any], has_ci: bool, has_se: bool) -> list[str]:
    """The 95% CI and stderr cells, when the table has those columns."""
    return ([esc(fmt_ci(score))] if has_ci else []) + ([esc(fmt(score["stderr"])) if "stderr" in score else ""] if has_se else [])


def _provenance_cells(details: dict[str, Any], cached: bool, pooled: bool) -> list[str]:
    """The Cached and Replicas cells, when the table has those columns."""
    replicas = details.get("replicas") or []
    return (([esc(cached_answers(details))] if cached else [])
            + ([f'<span title="{esc(", ".join(map(str, replicas)))}">{esc(len(replicas) or 1)}</span>'] if pooled else []))


def score_rows(run: RunDir) -> tuple[list[str], list[list[str]], list[str]]:
    """Header, rows and row classes of the score table (subsets as indented rows under their score)."""
    has_ci = any(ci95(s) or any(ci95(x) for x in subsets(s).values()) for s in run.scores)
    has_se = any(isinstance(s.get("stderr"), (int, float)) for s in run.scores)
    cached = any(cached_answers(s.get("details") or {}) for s in run.scores)
    pooled = any(len((s.get("details") or {}).get("replicas") or []) > 1 for s in run.scores)
    stopped = any(not_run(s.get("details") or {}) for s in run.scores)   # never sent: counted apart, not as failed
    two = any(own_number(s.get("details") or {}) for s in run.scores)
    header = (["Model", "Dataset", "Metric", "Score"] + (["lalmeval's own"] if two else []) + (["95% CI"] if has_ci else [])
              + (["Stderr"] if has_se else []) + ["Samples", "Failed"] + (["Not run"] if stopped else []) + (["Cached"] if cached else [])
              + (["Replicas"] if pooled else []) + ["Details"])
    rows, classes = [], []
    badge = partial_badge() if run.partial else ""
    for s in run.scores:
        details = s.get("details") or {}
        failed = (s.get("num_failed") or 0) - not_run(details)
        rows.append([esc(s["model"]), esc(s["dataset"]), esc(s["metric"]), esc(fmt(s.get("score"))) + badge + _repeats(details),
                     *([_own_cell(details)] if two else []), *_interval_cells(s, has_ci, has_se), esc(s.get("num_samples", "")),
                     f'<span class="reason">{esc(failed)}</span>' if failed else "0", *([esc(not_run(details))] if stopped else []),
                     *_provenance_cells(details, cached, pooled), _details_cell(details)])
        classes.append("")
        for name, sub in subsets(s).items():
            rows.append(["", esc(f"↳ {name}"), "", esc(fmt(sub.get("score"))), *([""] if two else []), *_interval_cells(sub, has_ci, has_se),
                         esc(sub.get("num_samples", "")), esc(sub.get("num_failed", "")), *[""] * (stopped + cached + pooled), ""])
            classes.append("subset")
    return header, rows, classes


def _scores_section(run: RunDir) -> str:
    header, rows, classes = score_rows(run)
    numeric = [i for i, h in enumerate(header) if h in ("Score", "lalmeval's own", "95% CI", "Stderr", "Samples", "Failed", "Cached", "Replicas")]
    note = '<p class="small">Failed samples are excluded from a score and counted in "Failed"; they are never scored 0.</p>'
    note += "".join(f'<p class="note provenance">{esc(line)}.</p>' for line in provenance_notes(run.scores))
    note += "".join(f'<p class="note two-numbers">{esc(line)}.</p>' for line in two_number_notes(run.scores))
    return f'<section id="scores"><h2>Scores</h2>{table(header, rows, numeric, classes, "score-table")}{note}</section>'


def _settings_section(run: RunDir) -> str:
    """How each model was reached and asked: its config entry side by side with the others' (values that
    differ between models in bold), then per dataset what its requests carried."""
    models = model_settings(run)
    keys = list(dict.fromkeys(k for _, pairs in models for k, _ in pairs))
    values = [dict(pairs) for _, pairs in models]
    config = []
    for key in keys:
        cells = [v.get(key, "") for v in values]
        differ = len(set(cells)) > 1
        config.append([esc(key)] + [f'<span class="mono">{"<strong>" if differ else ""}{esc(c)}{"</strong>" if differ else ""}</span>'
                                    for c in cells])
    none = '<span class="small">none</span>'
    rows = [[esc(r["dataset"]), esc(r["model"]), f'<span class="mono">{esc(r["params"])}</span>' if r["params"] else none,
             f'<div class="text">{esc(r["system"])}</div>' if r["system"] else none,
             (f'<div class="text">{esc(r["prompt"])}</div><div class="small">sample {esc(r["sample"])}</div>' if r["prompt"] else none),
             esc(r["protocol"])] for r in request_settings(run)]
    protocol = any(r["protocol"] for r in request_settings(run))
    header = ["Dataset", "Model", "Parameters as sent", "System prompt", "Prompt"] + (["Protocol"] if protocol else [])
    return (f'<section id="settings"><h2>Settings</h2><p class="small">Each model as the run\'s config.yaml gives it (secrets '
            f'redacted; values that differ between models in bold), then what its requests carried on each dataset, from its first '
            f'record.</p>{table(["Setting", *(name for name, _ in models)], config, table_id="model-settings")}'
            f'{table(header, [r if protocol else r[:-1] for r in rows], table_id="request-settings")}</section>')


def _reading_examples(examples: list[tuple[str, str, Optional[str]]]) -> str:
    items = "".join(f'<li><span class="sid">{esc(sid)}</span><div class="text">{esc(reply[:MAX_FIELD_CHARS])}</div>'
                    f'<div class="small">scored: <span class="mono">{esc("(unreadable)" if scored is None else scored)}</span></div></li>'
                    for sid, reply, scored in examples)
    return f"<details><summary>{len(examples)} example{'s' if len(examples) != 1 else ''}</summary><ul>{items}</ul></details>"


def _reading_section(run: RunDir, stats: list[GroupStats]) -> str:
    """Per model: how many replies each reading rule changed before scoring, with examples (raw reply, what was scored)."""
    found = {(g.dataset, g.model): g.readings for g in stats}
    rows = []
    for s in run.scores:
        reading = (s.get("details") or {}).get("reading")
        if not isinstance(reading, dict):
            continue
        examples = found.get((s["dataset"], s["model"]), {})
        rules = reading.get("rules") or {}
        cells = "".join(f"<div>{esc(rule)}: <b>{esc(count)}</b>{_reading_examples(examples.get(s['metric'] + ': ' + rule, []))}</div>"
                        for rule, count in rules.items()) or '<span class="small">none: every reply scored as it is</span>'
        rows.append([esc(s["model"]), esc(s["dataset"]), esc(s["metric"]), esc(reading.get("mode")),
                     esc(f'{reading.get("touched", 0)} of {s.get("num_samples", "?")}'), esc(reading.get("unreadable", 0)), cells])
    if not rows:
        return ""
    note = ('<p class="small">How each reply was read before it was scored (runspec or config <code>reading</code>; docs/reading.md): '
            "careful reading cuts lead-ins, engine tags, quotes, chat closers and notes, reads a label named by a synonym; "
            "an unreadable reply is scored wrong (an empty transcript, no label), never guessed. The sample browser shows each raw reply "
            "beside what was scored.</p>")
    header = ["Model", "Dataset", "Metric", "Reading", "Replies changed", "Unreadable", "Replies each rule touched"]
    return f'<section id="reading"><h2>Reading</h2>{note}{table(header, rows, [4, 5], table_id="reading-table")}</section>'


def _protocols_section(run: RunDir) -> str:
    rows = protocol_rows(run)
    if not rows:
        return ""
    note = ('<p class="small">The scoring convention of each score (runspec <code>protocol</code>) and what was actually used: '
            "normalizer, error unit, alignment, tokenizer, judge template, prompt and generation settings.</p>")
    return f'<section id="protocols"><h2>Scoring protocols</h2>{note}{table(PROTOCOL_HEADER, [[esc(c) for c in r] for r in rows])}</section>'


def _aggregates_section(run: RunDir) -> str:
    if not run.aggregates:
        return ""
    grouped = any("group" in a for a in run.aggregates)
    rows = [[esc(a.get("model")), esc(", ".join(a.get("names") or [])), esc(a.get("metric")), esc(fmt(a.get("pooled"))),
             esc(fmt_interval(a.get("pooled_ci95"))), esc(fmt(a.get("weighted_mean"))), esc(fmt(a.get("unweighted_mean"))),
             esc(a.get("num_samples", "")), esc(", ".join(a.get("datasets") or []))]
            + ([esc(group_cell(a))] if grouped else []) for a in run.aggregates]
    header = (["Model", "Aggregate", "Metric", "Pooled", "Pooled 95% CI", "Weighted mean", "Unweighted mean", "Scored samples", "Datasets"]
              + (["Group score"] if grouped else []))
    note = ('<p class="small">Pooled: one score over the samples of all the datasets (their statistics summed, e.g. Σ errors / '
            "Σ reference words); weighted: the datasets' scores weighted by scored samples; unweighted: their plain mean.</p>")
    return f'<section id="aggregates"><h2>Aggregates</h2>{table(header, rows, [3, 4, 5, 6, 7])}{note}</section>'


def _comparisons_section(run: RunDir) -> str:
    if not run.comparisons:
        return ""
    rows = []
    for c in run.comparisons:
        p = c.get("p_value")
        p_text = fmt_p(p)
        rows.append([esc(c.get("dataset")), esc(c.get("metric")), esc(c.get("model_a")), esc(c.get("model_b")),
                     esc(fmt(c.get("difference"))), esc(fmt_ci(c)), esc(p_text) + (" <strong>*</strong>" if isinstance(p, (int, float)) and p < 0.05 else "")])
    header = ["Dataset", "Metric", "Model A", "Model B", "A − B", "95% CI", "p"]
    note = '<p class="small">* p &lt; 0.05. The difference is model A\'s score minus model B\'s.</p>'
    return f'<section id="comparisons"><h2>Comparisons</h2>{table(header, rows, [4, 5, 6])}{note}</section>'


def _failures_section(run: RunDir) -> str:
    down = "".join(f'<div class="banner down">Endpoint of model <strong>{esc(m)}</strong> went down: {esc(r)}</div>' for m, r in run.endpoints_down.items())
    failures = [f for f in run.failures if f.get("kind") != NOT_RUN]
    stopped = sum(f.get("count") or 0 for f in run.failures if f.get("kind") == NOT_RUN)
    if stopped:  # not failures: the run stopped before asking; a resume asks
        down += f'<p class="note">{stopped:,} samples were not run: the run stopped before requesting them (a resume requests them).</p>'
    if not failures:
        return f'<section id="failures"><h2>Failures</h2>{down}<p>No sample failed.</p></section>'
    rows = [[esc(f.get("model")), esc(f.get("dataset")), esc(f.get("kind")), esc(f.get("count")), f'<pre class="reason">{esc(f.get("example"))}</pre>'] for f in failures]
    total = sum(f.get("count") or 0 for f in failures)
    return (f'<section id="failures"><h2>Failures <span class="small">({total} samples)</span></h2>{down}'
            f'{table(["Model", "Dataset", "Kind", "Count", "Example reason"], rows, [3])}</section>')


def model_series(run: RunDir) -> dict[str, int]:
    """Each model's colour index, in the order models first appear in the scores."""
    return {m: i for i, m in enumerate(dict.fromkeys(s["model"] for s in run.scores))}


def _plots_section(run: RunDir, stats: list[GroupStats]) -> str:
    series = model_series(run)
    scored = [Scored(s["dataset"], s["model"], series[s["model"]], s, run.partial) for s in run.scores]
    charts = "".join(f"<div>{c}</div>" for c in score_charts(scored))
    hists = "".join(score_histograms(stats, series))
    lat = "".join(latency_histograms(stats, series))
    return (f'<section id="plots"><h2>Plots</h2>{legend(list(series))}'
            f'<h3>Scores</h3><p class="small">Whiskers: 95% interval where the score has one.</p><div class="plots">{charts}</div>'
            f'<h3>Per-sample scores</h3><p class="small">As each metric stores them per sample (word error rate as a fraction, '
            f'accuracy as 0 or 1); failed samples have no score.</p><div class="plots">{hists}</div>'
            f'<h3>Latency</h3><p class="small">The endpoint\'s time per answered request, from the request leaving to the reply read '
            f'(time a sample waited for a free slot in lalmeval, and pauses between retries, left out; so are cached and failed samples).</p>'
            f'<div class="plots">{lat}</div></section>')


def _samples_section(table_data: SampleTable) -> str:
    shown, total = len(table_data.rows), table_data.total
    note = ""
    if shown < total:
        note = (f'<p class="note">This page holds {shown:,} of the run\'s {total:,} samples: the per-sample data is capped at '
                f'{MAX_SAMPLE_BYTES // 1_000_000} MB, failed samples first, shared over every dataset and model. '
                f"Every sample is in records/ and scores/.</p>")
    if table_data.truncated:
        note += f'<p class="small">Texts longer than {MAX_FIELD_CHARS:,} characters are cut here ({table_data.truncated:,} of them); records/ holds them whole.</p>'
    controls = ('<div class="controls"><input type="search" id="f-text" placeholder="Search id, prompt, reference, prediction, reply, error" aria-label="search">'
                '<select id="f-dataset" aria-label="dataset"><option value="">all datasets</option></select>'
                '<select id="f-model" aria-label="model"><option value="">all models</option></select>'
                '<label><input type="checkbox" id="f-failed"> failed only</label><span id="sample-count" class="small"></span></div>')
    pager = '<div class="pager"><button id="prev" type="button">‹ prev</button><span id="page-info" class="small"></span><button id="next" type="button">next ›</button></div>'
    note += audio_note(table_data)
    grid = '<table id="sample-table"><thead><tr id="sample-head"></tr></thead><tbody id="sample-rows"></tbody></table>'
    return (f'<section id="samples"><h2>Samples</h2>{note}<noscript><p class="note">The sample browser needs JavaScript.</p></noscript>'
            f'{controls}{grid}{pager}</section>')


def _header(run: RunDir) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in (run.final.get("versions") or {}).items())
    banner = (f'<div class="banner partial"><strong>Partial results.</strong> This run is partial ({esc(run.why_partial)}): every score '
              "covers only the samples it finished. Resume the run to complete it.</div>") if run.partial else ""
    optional = {"protocols": bool(protocol_rows(run)), "aggregates": bool(run.aggregates), "comparisons": bool(run.comparisons),
                "reading": any(isinstance((s.get("details") or {}).get("reading"), dict) for s in run.scores)}
    links = "".join(f'<a href="#{a}">{t}</a>' for a, t in (("scores", "Scores"), ("protocols", "Protocols"), ("reading", "Reading"), ("plots", "Plots"),
                                                          ("aggregates", "Aggregates"), ("comparisons", "Comparisons"),
                                                          ("failures", "Failures"), ("settings", "Settings"), ("samples", "Samples"))
                    if optional.get(a, True))
    return (f"<header><h1>Run {esc(run.run_id)}{partial_badge() if run.partial else ''}</h1>"
            f'<p class="meta">created {esc(run.final.get("created", "?"))} · {esc(versions)}</p>{_provenance_line(run)}{banner}<nav>{links}</nav></header>')


def _provenance_line(run: RunDir) -> str:
    """lalmeval's version and commit, the run's start, end and duration, its config hash, and the data it read."""
    found = run.final.get("provenance")
    if not isinstance(found, dict):
        return ""
    commit = found.get("commit")
    code = f"lalmeval {found.get('version', '?')}" + (f" at commit {str(commit)[:12]}{' (dirty)' if found.get('dirty') else ''}" if commit else "")
    times = f"started {found.get('started', '?')}, finished {found.get('finished', '?')} ({found.get('duration_s', '?')} s)"
    data = found.get("data_hashes") if isinstance(found.get("data_hashes"), dict) else {}
    read = "; ".join(f"{name}: {_data_identity(value)}" for name, value in data.items())
    return (f'<p class="meta" id="provenance">{esc(code)} · {esc(times)} · config sha256 {esc(str(found.get("config_hash", "?"))[:16])}</p>'
            + (f'<p class="meta">data read: {esc(read)}</p>' if read else "") + _usage_line(run))


def _usage_line(run: RunDir) -> str:
    """The run's tokens (the judge's among them) and its cost, when the servers reported usage."""
    usage, cost = run.final.get("usage"), run.final.get("cost")
    if not isinstance(usage, dict) or not usage.get("replies"):
        return ""
    judge = usage.get("judge") if isinstance(usage.get("judge"), dict) else None
    text = f"tokens: {usage.get('prompt_tokens', 0):,} prompt, {usage.get('completion_tokens', 0):,} completion"
    text += f" (the judge's {judge.get('total_tokens', 0):,} included)" if judge else ""
    text += f"; {usage['unreported']:,} repl(ies) reported none" if usage.get("unreported") else ""
    text += f"; cost {cost['total']:.6g}" if isinstance(cost, dict) and isinstance(cost.get("total"), (int, float)) else ""
    return f'<p class="meta" id="usage">{esc(text)}</p>'


def _data_identity(value: Any) -> str:
    if not isinstance(value, dict):
        return "?"
    if value.get("error"):
        return f"not hashed ({value['error']})"
    if value.get("hub"):
        return f"hub {value['hub']} revision {value.get('revision') or 'unknown'}"
    return f"sha256 {str(value.get('sha256'))[:16]} ({value.get('files')} file(s))"


def run_report(run: RunDir, stats: list[GroupStats], samples: SampleTable) -> str:
    """The whole report.html of one run."""
    body = (_header(run) + _scores_section(run) + _protocols_section(run) + _reading_section(run, stats) + _plots_section(run, stats) + _aggregates_section(run)
            + _comparisons_section(run) + _failures_section(run) + _settings_section(run) + _samples_section(samples))
    data = f'<script type="application/json" id="samples-data">{script_json(samples.payload())}</script>'
    return page(f"lalmeval run {run.run_id}", body, data + f"<script>{BROWSER_JS}</script>")
