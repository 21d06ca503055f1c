"""What a tracker gets of a run, per model: its scores as named numbers and a per-sample table per dataset."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from lalmeval.reports.rundir import RunDir, load_run

BASE_COLUMNS = ["id", "repeat", "reference", "prediction", "error"]


@dataclass
class Table:
    """The samples of one dataset on one model: id, repeat, reference, prediction, error, then a score column per metric."""

    columns: list[str]
    rows: list[list[Any]]


@dataclass
class ModelRun:
    """One model of a run as a tracker run: scalars by `<dataset>/<metric>/<statistic>` (score, num_samples, num_failed,
    ci95_low, ci95_high, stderr), tables by dataset. Every name is a leaf: no name is the folder of another (MLflow's
    file store keeps each metric in a file named after it)."""

    run_id: str
    model: str
    config: dict[str, Any]
    scalars: dict[str, float] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    partial: bool = False


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _score_scalars(score: dict[str, Any]) -> dict[str, float]:
    """A score's value, counts and interval under `<dataset>/<metric>/`."""
    key = f"{score['dataset']}/{score['metric']}"
    interval = score.get("ci95") or [None, None]
    values = {f"{key}/score": score.get("score"), f"{key}/num_samples": score.get("num_samples"), f"{key}/num_failed": score.get("num_failed"),
              f"{key}/ci95_low": interval[0], f"{key}/ci95_high": interval[1], f"{key}/stderr": score.get("stderr")}
    return {k: n for k, v in values.items() if (n := _number(v)) is not None}


def _aggregate_scalars(row: dict[str, Any]) -> dict[str, float]:
    """An aggregate's means under `aggregate/<names>/<metric>/`, and a group's score under `group/<group>/<metric>/score`."""
    key = f"aggregate/{'+'.join(map(str, row.get('names') or []))}/{row.get('metric')}"
    values = {f"{key}/weighted_mean": row.get("weighted_mean"), f"{key}/unweighted_mean": row.get("unweighted_mean")}
    if row.get("group"):
        values[f"group/{row['group']}/{row.get('metric')}/score"] = row.get("score")
    return {k: n for k, v in values.items() if (n := _number(v)) is not None}


def _table(run: RunDir, dataset: str, model: str, metrics: list[str]) -> Table:
    """Every sample's last record, with its score under each metric (None where it has none)."""
    index = run.record_index(dataset, model)
    scores = {metric: run.sample_scores(dataset, metric, model) for metric in metrics}
    rows = []
    for unit, record in zip(index, run.read_records(dataset, model, index.values())):
        rows.append([unit[0], unit[1], record.get("reference"), record.get("prediction"), record.get("error"),
                     *(scores[m].get(unit, (None, None))[0] for m in metrics)])
    return Table(BASE_COLUMNS + metrics, rows)


def _config(path: Path) -> dict[str, Any]:
    """The run's stored config.yaml (secrets already redacted there), or nothing."""
    try:
        data = yaml.safe_load((path / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def model_runs(run_dir: Path) -> list[ModelRun]:
    """One ModelRun per model of a written run, read from its directory alone."""
    run = load_run(run_dir)
    config = _config(run_dir)
    runs: dict[str, ModelRun] = {}
    for score in run.scores:
        model = runs.setdefault(score["model"], ModelRun(run.run_id, score["model"], config, partial=run.partial))
        model.scalars.update(_score_scalars(score))
    for row in run.aggregates:
        if row.get("model") in runs:
            runs[row["model"]].scalars.update(_aggregate_scalars(row))
    for dataset, model, metrics in run.groups():
        runs[model].tables[dataset] = _table(run, dataset, model, metrics)
    return list(runs.values())
