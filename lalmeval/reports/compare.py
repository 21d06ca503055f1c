"""lalmeval compare: paired differences between runs, like-for-like checks first, Holm-corrected, regressions flagged.

Each dataset–metric both runs scored is compared on the samples both scored, paired by (dataset,
sample id, repeat), with the paired bootstrap a run uses between its own models (stats.paired_bootstrap):
the per-sample statistics are rebuilt from each run's scores/ files by the metric itself, exactly as
the run computed them. Before any number, what decides a score is compared: protocol, prompt,
generation settings, data content and selected samples; any difference is a reason to refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from lalmeval.catalog.runspecs import Dataset, DatasetSpec
from lalmeval.errors import UserError
from lalmeval.metrics import METRICS, MetricContext
from lalmeval.postprocess import POSTPROCESSORS
from lalmeval.reports.rundir import RunDir
from lalmeval.results.ledger import Unit
from lalmeval.results.store import file_name, read_jsonl
from lalmeval.stats import SampleStats, paired_bootstrap

ALPHA = 0.05
# Settings that differ between two runs of one model without making them unlike: the sampling seed is the
# noise a comparison must see through, not a change of what is asked.
NOISE_KEYS = frozenset({"seed"})
SHOWN_EXAMPLES = 3


@dataclass(frozen=True)
class Side:
    """One model of one run: what is compared."""

    run: RunDir
    model: str

    @property
    def label(self) -> str:
        return f"{self.run.run_id}:{self.model}"


@dataclass
class Comparison:
    """Candidate against baseline: the like-for-like differences and one row per dataset–metric."""

    baseline: Side
    candidate: Side
    differences: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)


def lower_is_better(metric: str) -> bool:
    """Whether a rise of the metric is a regression (an error rate); unknown metrics count as higher is better."""
    try:
        return bool(METRICS.get(metric).lower_is_better)
    except UserError:
        return metric.endswith("error_rate")


def model_pairs(baseline: RunDir, candidate: RunDir, pairs: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(baseline model, candidate model) pairs: as given (--pair A=B), one model each, or the models both runs share."""
    ours, theirs = _models(baseline), _models(candidate)
    if pairs:
        out = []
        for text in pairs:
            a, sep, b = text.partition("=")
            if not sep or a not in ours or b not in theirs:
                raise UserError(f"--pair {text!r}: give BASELINE_MODEL=CANDIDATE_MODEL; models of {baseline.path}: {', '.join(ours)}; "
                                f"of {candidate.path}: {', '.join(theirs)}")
            out.append((a, b))
        return out
    if len(ours) == 1 and len(theirs) == 1:
        return [(ours[0], theirs[0])]
    shared = [m for m in ours if m in theirs]
    if not shared:
        raise UserError(f"{baseline.path} ({', '.join(ours) or 'no models'}) and {candidate.path} ({', '.join(theirs) or 'no models'}) "
                        f"share no model name: say which to compare with --pair BASELINE_MODEL=CANDIDATE_MODEL")
    return [(m, m) for m in shared]


def _models(run: RunDir) -> list[str]:
    return list(dict.fromkeys(str(s["model"]) for s in run.scores))


def compare(baseline: Side, candidate: Side, resamples: int, seed: int, refuse: bool = True) -> Comparison:
    """Like-for-like checks, then (unless they found a difference and `refuse`) the paired difference
    (candidate − baseline) of every dataset–metric both scored."""
    result = Comparison(baseline, candidate)
    base_scores, cand_scores = _scores(baseline), _scores(candidate)
    shared = [key for key in base_scores if key in cand_scores]
    result.not_compared = [f"{d} · {m}: only in {baseline.label}" for d, m in base_scores if (d, m) not in cand_scores]
    result.not_compared += [f"{d} · {m}: only in {candidate.label}" for d, m in cand_scores if (d, m) not in base_scores]
    result.differences = like_for_like(baseline, candidate, shared, base_scores, cand_scores)
    if result.differences and refuse:
        return result
    for dataset, metric in shared:
        result.rows.append(_row(baseline, candidate, dataset, metric, resamples, seed))
    holm([r for r in result.rows if r.get("p_value") is not None])
    return result


def _scores(side: Side) -> dict[tuple[str, str], dict[str, Any]]:
    return {(str(s["dataset"]), str(s["metric"])): s for s in side.run.scores if s.get("model") == side.model}


def _row(baseline: Side, candidate: Side, dataset: str, metric: str, resamples: int, seed: int) -> dict[str, Any]:
    """One dataset–metric: both scores as the runs report them, and the paired difference on the samples both scored."""
    row: dict[str, Any] = {"dataset": dataset, "metric": metric, "lower_is_better": lower_is_better(metric)}
    a, b = sample_stats(baseline, dataset, metric), sample_stats(candidate, dataset, metric)
    if a is None or b is None:
        row["note"] = "no per-sample statistics to pair (the metric keeps none, or nothing was scored)"
        return row
    found = paired_bootstrap(b, a, resamples, seed)
    if found is None:
        row["note"] = "no sample scored in both runs"
        return row
    row.update(num_samples=found["num_samples"], baseline=found["score_b"], candidate=found["score_a"],
               difference=found["difference"], ci95=found["ci95"], p_value=found["p_value"],
               test=f"paired bootstrap over shared samples, two-sided ({resamples} resamples, seed {seed})")
    return row


def sample_stats(side: Side, dataset: str, metric: str) -> Optional[SampleStats]:
    """The per-sample statistics the run's score was computed from, read back from its scores/ file.

    As the run did: lines sorted by (id, repeat); a sample with any repeat unscored leaves the score
    whole; with repeats, a sample's repeats are one row (one draw of the bootstrap)."""
    path = side.run.path / "scores" / file_name([dataset, metric, side.model], ".jsonl")
    items = sorted(read_jsonl(path, "scores file"),
                   key=lambda x: (str(x.get("id")), x.get("repeat") or 0))
    if not items:
        return None
    failed = {x.get("id") for x in items if x.get("score") is None}
    kept = [{**x, "id": str(x["id"])} for x in items if x.get("id") not in failed]
    try:
        stats = _metric(metric).sample_stats(kept) if kept else None
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{path}: cannot read its per-sample statistics ({type(exc).__name__}: {exc})") from None
    repeated = any(x.get("repeat") for x in kept)
    return stats.pooled() if stats is not None and repeated else stats


def _metric(name: str) -> Any:
    """The metric, to turn per-sample lines into its statistics (a stand-in dataset: the lines already hold what the data gave)."""
    stand_in = Dataset("compare", "", "", DatasetSpec(hf_repo="-", language="en"), Path("-"))
    return METRICS.get(name)(stand_in, POSTPROCESSORS.get("GeneralPostprocessor")(), MetricContext())


def holm(rows: list[dict[str, Any]]) -> None:
    """Holm's step-down correction over `rows` (their p_value): sets p_holm; controls the family-wise error rate."""
    order = sorted(range(len(rows)), key=lambda i: rows[i]["p_value"])
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(rows) - rank) * rows[index]["p_value"]))
        rows[index]["p_holm"] = running


def verdict(row: dict[str, Any]) -> str:
    """'worse', 'better' (corrected p below ALPHA) or 'no change'."""
    if row.get("p_holm") is None or row["p_holm"] >= ALPHA or row["difference"] == 0:
        return "no change"
    rose = row["difference"] > 0
    return "worse" if rose == row["lower_is_better"] else "better"


def worse_by(row: dict[str, Any]) -> float:
    """How many points the candidate is worse than the baseline (negative: better)."""
    return row["difference"] if row["lower_is_better"] else -row["difference"]


def regressions(result: Comparison, points: float) -> list[dict[str, Any]]:
    """Rows worse by more than `points` with a corrected p below ALPHA."""
    return [r for r in result.rows if verdict(r) == "worse" and worse_by(r) > points]


def like_for_like(baseline: Side, candidate: Side, shared: list[tuple[str, str]], base_scores: dict[tuple[str, str], dict[str, Any]],
                  cand_scores: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """Every reason the two runs did not ask and score the same thing: each a line naming where (the datasets
    it holds for, when several share it) and what differs."""
    found: dict[str, list[str]] = {}   # what differs → where
    for dataset, metric in shared:
        a = _without_noise((base_scores[(dataset, metric)].get("details") or {}).get("protocol") or {})
        b = _without_noise((cand_scores[(dataset, metric)].get("details") or {}).get("protocol") or {})
        for line in _dict_changes("protocol", a, b):
            found.setdefault(line, []).append(f"{dataset} · {metric}")
    hashes = [((side.run.final.get("provenance") or {}).get("data_hashes") or {}) for side in (baseline, candidate)]
    for dataset in dict.fromkeys(d for d, _ in shared):
        a, b = _content(hashes[0].get(dataset)), _content(hashes[1].get(dataset))
        lines = [f"the data differ (content {a[:16]} in {baseline.label}, {b[:16]} in {candidate.label})"] if a and b and a != b else []
        for line in lines + _record_changes(baseline, candidate, dataset):
            found.setdefault(line, []).append(dataset)
    partial = [f"{side.label} is partial: {side.run.why_partial}" for side in (baseline, candidate) if side.run.partial]
    return partial + [f"{_where(places)}: {line}" for line, places in found.items()]


def _where(places: list[str]) -> str:
    shown = ", ".join(places[:SHOWN_EXAMPLES])
    return shown if len(places) <= SHOWN_EXAMPLES else f"{shown} and {len(places) - SHOWN_EXAMPLES} more"


def _content(value: Any) -> Optional[str]:
    """What identifies the data read: its content hash or hub revision (not where it lay)."""
    if not isinstance(value, dict):
        return None
    found = value.get("sha256") or value.get("revision")
    return str(found) if found else None


def _without_noise(protocol: dict[str, Any]) -> dict[str, Any]:
    out = dict(protocol)
    if isinstance(out.get("generation"), dict):
        out["generation"] = {k: v for k, v in out["generation"].items() if k not in NOISE_KEYS}
    return out


def _dict_changes(what: str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """'<what>.<key>: x → y' for each key whose value differs."""
    return [f"{what}.{key}: {a.get(key)!r} → {b.get(key)!r}" for key in sorted(set(a) | set(b), key=str) if a.get(key) != b.get(key)]


def records(side: Side, dataset: str) -> dict[Unit, dict[str, Any]]:
    """The last record of each (sample id, repeat) of the model on the dataset (a resumed run appends newer ones)."""
    path = side.run.path / "records" / file_name([dataset, side.model], ".jsonl")
    return {(str(r["id"]), r.get("repeat") or 0): r for r in read_jsonl(path, "records file") if "id" in r}


def _record_changes(baseline: Side, candidate: Side, dataset: str) -> list[str]:
    """Selected samples, then what each shared sample was asked with (prompt, system, generation settings) and its reference."""
    a, b = records(baseline, dataset), records(candidate, dataset)
    out = []
    only_a, only_b = [u for u in a if u not in b], [u for u in b if u not in a]
    if only_a or only_b:
        out.append(f"the selected samples differ: {len(only_a)} only in {baseline.label}{_examples(only_a)}, "
                   f"{len(only_b)} only in {candidate.label}{_examples(only_b)}")
    for what in ("prompt", "system", "params", "reference"):
        changed = [u for u in a if u in b and _built(a[u]) and _built(b[u]) and _asked(a[u], what) != _asked(b[u], what)]
        if changed:
            first = changed[0]
            out.append(f"the {_WHAT[what]} changed on {len(changed)} sample(s), e.g. {first[0]!r}: "
                       f"{_clip(_asked(a[first], what))} → {_clip(_asked(b[first], what))}")
    return out


_WHAT = {"prompt": "prompt", "system": "system prompt", "params": "generation settings", "reference": "reference"}


def _asked(record: dict[str, Any], what: str) -> Any:
    value = record.get(what)
    if what == "params" and isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in NOISE_KEYS}
    return value


def _built(record: dict[str, Any]) -> bool:
    """Whether the record holds its request as built: a sample left without one (not run, unreadable) has a blank record."""
    return not record.get("error") or bool(record.get("prompt"))


def _clip(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _examples(units: list[Unit]) -> str:
    if not units:
        return ""
    shown = ", ".join(repr(i) + (f" (repeat {r})" if r else "") for i, r in units[:SHOWN_EXAMPLES])
    return f" ({shown}{', …' if len(units) > SHOWN_EXAMPLES else ''})"
