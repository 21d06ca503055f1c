"""The samples of several runs side by side (lalmeval report RUN...): one row per sample, one column per run.

The data goes into the page as compact columns (each text once, rows referring to it by index);
the page's script shows one page of rows at a time, so 10 runs of 20 000 samples stay usable: the
rows never all enter the DOM. Each column is one model of one run, labelled as on the leaderboard.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Sequence
from urllib.parse import quote, unquote

from lalmeval.reports.audio import clip_key, players
from lalmeval.reports.compare import lower_is_better
from lalmeval.reports.order import natural_key
from lalmeval.reports.rundir import RunDir
from lalmeval.results.ledger import Unit

MAX_TEXT = 2_000   # characters of a prediction or reference shown; records/ hold the whole text


class _Strings:
    """Each distinct text once; rows hold indexes."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: Any) -> Optional[int]:
        if not isinstance(text, str):
            return None
        text = text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " …"
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.items)
            self.items.append(text)
        return found


def columns(runs: Sequence[RunDir]) -> list[tuple[str, RunDir, str]]:
    """(label, run, model) of each model of each run, in the order given; a label names the run, and the model when a run has several."""
    found = []
    for run in runs:
        models = list(dict.fromkeys(str(s["model"]) for s in run.scores))
        found += [(run.run_id if len(models) == 1 else f"{run.run_id} · {model}", run, model) for model in models]
    return found


def _datasets(cols: list[tuple[str, RunDir, str]]) -> dict[str, list[str]]:
    """Each dataset any column scored, with every metric scored on it, in the order first met."""
    found: dict[str, list[str]] = {}
    for _, run, model in cols:
        for score in run.scores:
            if score["model"] == model:
                metrics = found.setdefault(str(score["dataset"]), [])
                if score["metric"] not in metrics:
                    metrics.append(str(score["metric"]))
    return found


def payload(runs: Sequence[RunDir], page_dir: Path) -> dict[str, Any]:
    """What the page's script reads: columns, datasets and their metrics, texts, and the rows as columns of indexes."""
    cols = columns(runs)
    datasets = _datasets(cols)
    strings = _Strings()
    rows: dict[str, list[Any]] = {"dataset": [], "id": [], "repeat": [], "ref": [], "clip": []}
    preds: list[list[Optional[int]]] = [[] for _ in cols]
    failed: list[list[int]] = [[] for _ in cols]
    scores: list[list[Optional[list[Optional[float]]]]] = [[] for _ in cols]
    clips: list[tuple[RunDir, Any]] = []
    for d_index, (dataset, metrics) in enumerate(datasets.items()):
        per_col = [_read(run, dataset, model, metrics) for _, run, model in cols]
        units = sorted({u for found in per_col for u in found}, key=lambda u: (natural_key(u[0]), u[1]))
        for unit in units:
            first = next((c, found[unit]) for c, found in enumerate(per_col) if unit in found)
            record = first[1][0]
            rows["dataset"].append(d_index)
            rows["id"].append(unit[0])
            rows["repeat"].append(unit[1])
            rows["ref"].append(strings.add(record.get("reference")))
            notes = (record.get("extra") or {}).get("audio")
            key = next((k for k in map(clip_key, notes if isinstance(notes, list) else []) if k is not None), None)
            rows["clip"].append(len(clips) if key is not None else None)
            if key is not None:
                clips.append((cols[first[0]][1], key))
            for c, found in enumerate(per_col):
                item = found.get(unit)
                preds[c].append(strings.add(item[0].get("prediction")) if item else None)
                failed[c].append(1 if item and item[0].get("error") else 0)
                scores[c].append(item[1] if item else None)
    files, clip_rows = _players(clips, page_dir)
    return {"columns": [label for label, _, _ in cols],
            "datasets": [{"name": d, "metrics": m, "lower": [lower_is_better(x) for x in m]} for d, m in datasets.items()],
            "strings": strings.items, "rows": rows, "pred": preds, "failed": failed, "scores": scores, "files": files, "clips": clip_rows}


def _read(run: RunDir, dataset: str, model: str, metrics: list[str]) -> dict[Unit, tuple[dict[str, Any], list[Optional[float]]]]:
    """Each (sample, repeat) of one model on one dataset: its last record and its score under each metric."""
    index = run.record_index(dataset, model)
    if not index:
        return {}
    per_metric = [run.sample_scores(dataset, metric, model) for metric in metrics]
    found = {}
    for unit, record in zip(index, run.read_records(dataset, model, index.values())):
        found[unit] = ({k: record.get(k) for k in ("reference", "prediction", "error", "extra")},
                       [s.get(unit, (None, None))[0] for s in per_metric])
    return found


def _players(clips: list[tuple[RunDir, Any]], page_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The audio of every row, per run as report.html plays it; links re-based on the page's folder."""
    files: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = [{}] * len(clips)
    by_run: dict[Path, list[int]] = {}
    for i, (run, _) in enumerate(clips):
        by_run.setdefault(run.path, []).append(i)
    for path, members in by_run.items():
        run_files, run_clips, embedded = players(path, [clips[i][1] for i in members])
        for item in run_files:
            if not embedded and not item["src"].startswith(("file:", "data:")):
                item = {**item, "src": quote(Path(os.path.relpath(path / unquote(item["src"]), page_dir)).as_posix())}
            files.append(item)
        offset = len(files) - len(run_files)
        for i, clip in zip(members, run_clips):
            out[i] = {**clip, "file": clip["file"] + offset if clip["file"] is not None else None}
    return files, out
