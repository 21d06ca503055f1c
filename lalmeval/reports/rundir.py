"""Reading a finished run directory: final_scores.json, records and per-sample scores."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from lalmeval.errors import UserError
from lalmeval.ledger import Unit
from lalmeval.store import RunStore, read_jsonl


@dataclass(frozen=True)
class RunDir:
    """One run directory and its final_scores.json; records and scores are read on demand."""

    path: Path
    final: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.final.get("run_id") or self.path.name)

    @property
    def interrupted(self) -> bool:
        """An interrupted run's scores cover only the samples it finished: they are partial."""
        return bool(self.final.get("interrupted"))

    @property
    def scores(self) -> list[dict[str, Any]]:
        return list(self.final.get("scores") or [])

    @property
    def aggregates(self) -> list[dict[str, Any]]:
        return list(self.final.get("aggregates") or [])

    @property
    def comparisons(self) -> list[dict[str, Any]]:
        return list(self.final.get("comparisons") or [])

    @property
    def failures(self) -> list[dict[str, Any]]:
        return list(self.final.get("failures") or [])

    @property
    def endpoints_down(self) -> dict[str, str]:
        return dict(self.final.get("endpoints_down") or {})

    def groups(self) -> list[tuple[str, str, list[str]]]:
        """(dataset, model, metrics) for every pair that was scored, in the order of the scores."""
        metrics: dict[tuple[str, str], list[str]] = {}
        for score in self.scores:
            metrics.setdefault((score["dataset"], score["model"]), []).append(score["metric"])
        return [(dataset, model, names) for (dataset, model), names in metrics.items()]

    def records(self, dataset: str, model: str, keep: Optional[Sequence[str]] = None) -> dict[Unit, dict[str, Any]]:
        """The last record of each (sample, repeat) (a resumed run appends newer ones), in file order; only `keep` fields if given."""
        return _by_unit(RunStore(self.path).records_path(dataset, model), keep)

    def sample_scores(self, dataset: str, metric: str, model: str, keep: Optional[Sequence[str]] = None) -> dict[Unit, dict[str, Any]]:
        """Per-sample scores of one (dataset, metric, model), by (sample id, repeat); only `keep` fields if given."""
        return _by_unit(RunStore(self.path).scores_path(dataset, metric, model), keep)


def _by_unit(path: Path, keep: Optional[Sequence[str]]) -> dict[Unit, dict[str, Any]]:
    """Lines by (id, repeat): every repeat of a sample is a record of its own (scores/ leave out repeat 0)."""
    # Projecting while reading keeps a 100k-sample run's memory to what a report shows.
    found = {}
    for item in read_jsonl(path):
        if "id" in item:
            repeat = item.get("repeat") or 0
            found[(str(item["id"]), repeat if isinstance(repeat, int) else 0)] = item if keep is None else {k: item.get(k) for k in keep}
    return found


def load_run(path: Path) -> RunDir:
    """Open a run directory; a missing one or one without final_scores.json is a UserError naming it."""
    if not path.is_dir():
        raise UserError(f"{path}: no such run directory")
    final_path = path / "final_scores.json"
    if not final_path.is_file():
        raise UserError(f"{path}: no final_scores.json (not a run directory, or a run that was never scored)")
    try:
        final = json.loads(final_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{final_path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise UserError(f"{final_path}: not valid JSON (nested too deeply)") from None
    if not isinstance(final, dict):
        raise UserError(f"{final_path}: expected a JSON object")
    return RunDir(path, final)


def ci95(score: dict[str, Any]) -> Optional[tuple[float, float]]:
    """The score's 95% interval when it has one."""
    interval = score.get("ci95")
    if isinstance(interval, (list, tuple)) and len(interval) == 2 and all(isinstance(x, (int, float)) for x in interval):
        return float(interval[0]), float(interval[1])
    return None


def subsets(score: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """details.subsets of a score, {name: {score, num_samples}}; empty when absent."""
    found = (score.get("details") or {}).get("subsets")
    return {str(k): v for k, v in found.items() if isinstance(v, dict)} if isinstance(found, dict) else {}
