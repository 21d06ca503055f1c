"""Per-sample data for report.html: plot inputs from every sample, and browser rows within a size budget."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from lalmeval.reports.audio import EMBED_BYTES, clip_key, players
from lalmeval.reports.order import natural_key
from lalmeval.reports.rundir import RunDir
from lalmeval.results.store import RunStore

# report.html must open in a browser for any run size: the per-sample rows it embeds are capped
# (README, "Reports"). The plots always use every sample.
MAX_SAMPLE_BYTES = 4_000_000
MAX_FIELD_CHARS = 2_000


@dataclass
class GroupStats:
    """Every sample's latency and per-metric score for one (dataset, model)."""

    dataset: str
    model: str
    metrics: list[str]
    total: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)
    scores: dict[str, list[float]] = field(default_factory=dict)
    readings: dict[str, list[tuple[str, str, Optional[str]]]] = field(default_factory=dict)  # "metric: rule" → (id, reply, scored)
    ttft: list[float] = field(default_factory=list)   # streamed replies: seconds to the first text
    ttfa: list[float] = field(default_factory=list)   # ... and to the first audio


@dataclass
class SampleTable:
    """Compact browser rows: strings are stored once in `strings` and rows refer to them by index.

    A row: [group, sample id, prompt, reference, prediction, reply, error, scores per metric,
    latency, repeat (None when the run has no repeats), clips (indexes into `clips`), reading rules
    (None when the reply was scored as it is), spoken reply (None, or [its index into `clips`, its
    transcript or None])]; texts are indexes into `strings`. The prediction is what was scored: when
    careful reading (or the judge) read the reply, the text or label it read. Rows are in natural id
    order, each sample's models next to each other.
    `clips` and `files` are the audio the rows play (reports/audio.py)."""

    groups: list[dict[str, Any]] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    total: int = 0
    truncated: int = 0
    clip_keys: list[tuple] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    clips: list[dict[str, Any]] = field(default_factory=list)
    embedded: bool = True
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    _clip_index: dict[tuple, int] = field(default_factory=dict, repr=False)

    def payload(self) -> dict[str, Any]:
        """What the page's script reads."""
        return {"groups": self.groups, "strings": self.strings, "rows": self.rows, "total": self.total,
                "files": self.files, "clips": self.clips}

    def clip_indexes(self, notes: Any) -> Optional[list[int]]:
        """Indexes of a record's noted clips in `clip_keys` (a clip shared by several models is listed once)."""
        found = []
        for key in (k for k in map(clip_key, notes if isinstance(notes, list) else []) if k is not None):
            if key not in self._clip_index:
                self._clip_index[key] = len(self.clip_keys)
                self.clip_keys.append(key)
            found.append(self._clip_index[key])
        return found or None

    def encode(self, head: list[Any], texts: list[Optional[str]], tail: list[Any], budget: int) -> Optional[tuple[list[Any], int]]:
        """The row head + string slots + tail and its size in bytes, or None when it does not fit the budget."""
        new = {t for t in texts if t is not None and t not in self._index}
        cost = sum(len(json.dumps(t, ensure_ascii=False).encode()) + 1 for t in new)
        # A new string's index is not known yet; the next free one is close enough for a size.
        slots = [None if t is None else self._index.get(t, len(self._index)) for t in texts]
        cost += len(json.dumps(head + slots + tail, ensure_ascii=False).encode()) + 1
        if cost > budget:
            return None
        for text in texts:
            if text is not None and text not in self._index:
                self._index[text] = len(self.strings)
                self.strings.append(text)
        return head + [None if t is None else self._index[t] for t in texts] + tail, cost


def _cut(text: Optional[str]) -> Optional[str]:
    if text is None or len(text) <= MAX_FIELD_CHARS:
        return text
    return text[:MAX_FIELD_CHARS] + f" … [{len(text) - MAX_FIELD_CHARS} more characters in records/]"


def _errors(record: dict[str, Any], judge_failures: list[Optional[str]], metrics: list[str]) -> Optional[str]:
    """The sample's failure reason, and any judge failure, in full."""
    reasons = [record["error"]] if record.get("error") else []
    reasons += [f"{m}: {failed}" for m, failed in zip(metrics, judge_failures) if failed]
    return "\n".join(reasons) or None


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


MAX_READING_EXAMPLES = 3  # per (metric, rule) and (dataset, model)


def _read(stats: GroupStats, metrics: list[str], readings: list[dict[Any, Any]], unit: Any, record: dict[str, Any],
          raw: list[Optional[str]]) -> Optional[str]:
    """The reading rules of a browser row ('word_error_rate: lead_in, closer'), with its prediction slot set to
    what was scored; each rule keeps a few examples for the report's Reading section."""
    shown = []
    for metric, found in zip(metrics, readings):
        if unit not in found:
            continue
        rules, scored = found[unit]
        if not shown:
            raw[2] = scored if scored is not None else "(unreadable)"
        shown.append(f"{metric}: {', '.join(rules)}")
        for rule in rules:
            examples = stats.readings.setdefault(f"{metric}: {rule}", [])
            if len(examples) < MAX_READING_EXAMPLES:
                examples.append((str(unit[0]), str(record.get("reply") or ""), scored))
    return "; ".join(shown) or None


def _group(run: RunDir, index: int, dataset: str, model: str, metrics: list[str], table: SampleTable, budget: int) -> tuple[GroupStats, int]:
    """Read one (dataset, model): stats from every record (each repeat of a sample is one), browser rows
    (failed first) while the budget lasts, listed by sample id and repeat. Texts are read from disk only
    for the rows that fit, so memory does not grow with the run."""
    stats = GroupStats(dataset, model, metrics, scores={m: [] for m in metrics})
    scores = [run.sample_scores(dataset, m, model) for m in metrics]
    refs = sorted(run.record_index(dataset, model).items(), key=lambda item: (natural_key(item[0][0]), item[0][1]))
    repeated = any(repeat for (_, repeat), _ in refs)
    candidates = []
    for order, (unit, ref) in enumerate(refs):
        per_metric = [s.get(unit, (None, None)) for s in scores]
        for metric, (value, _) in zip(metrics, per_metric):
            if value is not None:
                stats.scores[metric].append(value)
        judge_failures = [failed for _, failed in per_metric]  # or the reason a metric could not score it
        ok = not ref.failed and not any(judge_failures)
        if not ok:
            stats.failed += 1  # as num_failed counts it: no prediction, or no score
        if not ref.failed and ref.latency is not None:
            stats.latencies.append(ref.latency)
            stats.ttft.extend([ref.ttft] if ref.ttft is not None else [])
            stats.ttfa.extend([ref.ttfa] if ref.ttfa is not None else [])
        candidates.append((ok, order, unit, ref, judge_failures))
    stats.total = len(refs)
    candidates.sort(key=lambda c: c[:2])
    used, kept = 0, []
    heard = _transcripts(run, dataset, model, metrics)
    records = run.read_records(dataset, model, (c[3] for c in candidates))
    readings = [run.sample_readings(dataset, m, model) for m in metrics]
    for (_, order, (sample_id, repeat), _, judge_failures), record in zip(candidates, records):
        values = [value for value, _ in (s.get((sample_id, repeat), (None, None)) for s in scores)]
        raw = [record.get(k) for k in ("prompt", "reference", "prediction", "reply")] + [_errors(record, judge_failures, metrics)]
        rules = _read(stats, metrics, readings, (sample_id, repeat), record, raw)
        said = heard.get((sample_id, repeat)) if record.get("audio_path") else None
        tail = [values, _number(record.get("latency")), repeat if repeated else None, None, rules,
                None if said is None else [None, _cut(said)]]
        encoded = table.encode([index, sample_id], [_cut(t) for t in raw], tail, budget - used)
        if encoded is None:
            break
        encoded[0][-3] = table.clip_indexes((record.get("extra") or {}).get("audio"))  # only the clips of rows kept
        if isinstance(record.get("audio_path"), str):   # the spoken reply plays beside its transcript and its text part
            spoken = table.clip_indexes([{"spoken": record["audio_path"]}])
            encoded[0][-1] = [spoken[0] if spoken else None, encoded[0][-1][1] if encoded[0][-1] else None]
        used += encoded[1]
        kept.append((order, encoded[0]))
        table.truncated += sum(1 for t in raw if t is not None and len(t) > MAX_FIELD_CHARS)
    records.close()
    table.rows.extend(row for _, row in sorted(kept, key=lambda k: k[0]))  # back in natural (id, repeat) order
    return stats, used


def _transcripts(run: RunDir, dataset: str, model: str, metrics: list[str]) -> dict[tuple[str, int], str]:
    """What the transcriber heard in each spoken reply, from a speech metric's scores file (none without one)."""
    for metric in metrics:
        if metric.startswith("speech_"):
            return run.sample_field(dataset, metric, model, "speech_transcript")
    return {}


def collect(run: RunDir, max_bytes: int = MAX_SAMPLE_BYTES, audio_bytes: int = EMBED_BYTES) -> tuple[list[GroupStats], SampleTable]:
    """Stats for the plots and the browser rows of a run; small groups go first so large ones share what is left."""
    groups = run.groups()
    store = RunStore(run.path)
    sizes = [store.records_path(d, m).stat().st_size if store.records_path(d, m).exists() else 0 for d, m, _ in groups]
    table = SampleTable(groups=[{"dataset": d, "model": m, "metrics": ms} for d, m, ms in groups])
    stats: list[Optional[GroupStats]] = [None] * len(groups)
    left = max_bytes
    for done, i in enumerate(sorted(range(len(groups)), key=lambda i: sizes[i])):
        dataset, model, metrics = groups[i]
        stats[i], used = _group(run, i, dataset, model, metrics, table, left // (len(groups) - done))
        left -= used
    table.total = sum(s.total for s in stats if s)
    # Side by side: a sample's rows of every model together, datasets in the order of the scores, ids in natural order.
    datasets = {d: i for i, d in enumerate(dict.fromkeys(d for d, _, _ in groups))}
    table.rows.sort(key=lambda row: (datasets[groups[row[0]][0]], natural_key(row[1]), row[9] or 0, row[0]))  # row[9]: repeat
    table.files, table.clips, table.embedded = players(run.path, table.clip_keys, audio_bytes)
    return [s for s in stats if s], table


def audio_note(table: SampleTable) -> str:
    """One line under the Samples heading saying how the page's audio plays: embedded, or linked."""
    if not table.clips:
        return ""
    playable = sum(1 for clip in table.clips if clip["file"] is not None)
    limit = f"{EMBED_BYTES / 1_000_000:g} MB"
    if table.embedded:
        how = f"embedded in this page (the run's clips add up to {limit} at most), so it plays wherever the page goes"
    else:
        how = (f"linked, not embedded (the clips add up to more than {limit}): the links lead to the files by their path "
               "relative to the run's folder, so they play while the report stays beside the data")
    return f'<p class="small">Audio of {playable:,} of the {len(table.clips):,} clips shown: {how}.</p>'
