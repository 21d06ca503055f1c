"""Reading a finished run directory: final_scores.json, records and per-sample scores."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple, Optional

from lalmeval.errors import UserError
from lalmeval.files import check_regular
from lalmeval.results.ledger import Unit
from lalmeval.results.store import RunStore, read_jsonl


@dataclass(frozen=True)
class RunDir:
    """One run directory and its final_scores.json; records and scores are read on demand."""

    path: Path
    final: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.final.get("run_id") or self.path.name)

    @property
    def partial(self) -> bool:
        """The scores cover only part of the samples: the run was interrupted, a dataset broke off, or no server started."""
        return bool(self.final.get("interrupted") or self.final.get("broken_off") or self.failed)

    @property
    def failed(self) -> str:
        """Why the run evaluated nothing (a launched server that never answered), or ''."""
        return str(self.final.get("launch_failed") or "")

    @property
    def why_partial(self) -> str:
        """Why the scores are partial, as the end of a sentence ('' when they are not)."""
        if self.failed:
            return f"the run failed before its first request: {self.failed}"
        if self.final.get("stopped"):   # max_failure_rate: the run stopped itself
            return f"the run {self.final['stopped']}"
        if self.final.get("interrupted"):
            return "the run was interrupted"
        broken = self.final.get("broken_off")
        return f"the data of {', '.join(map(str, broken))} could not be read to the end" if broken else ""

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

    def record_index(self, dataset: str, model: str) -> dict[Unit, RecordRef]:
        """Where the last record of each (sample, repeat) is (a resumed run appends newer ones), in file
        order, with what the plots need; the texts stay on disk until `read_records` fetches them."""
        index: dict[Unit, RecordRef] = {}
        for offset, item in _lines(RunStore(self.path).records_path(dataset, model)):
            unit = _unit(item)
            if unit is not None:
                latency = item.get("latency")
                answered = bool(item.get("attempts")) and isinstance(latency, (int, float)) and not isinstance(latency, bool)
                index[unit] = RecordRef(offset, bool(item.get("error")), float(latency) if answered else None,
                                        _seconds(item.get("ttft")) if answered else None, _seconds(item.get("ttfa")) if answered else None)
        return index

    def read_records(self, dataset: str, model: str, refs: Iterable[RecordRef]) -> Iterator[dict[str, Any]]:
        """The records at `refs`, one at a time, in the order given."""
        with RunStore(self.path).records_path(dataset, model).open("rb") as handle:
            for ref in refs:
                handle.seek(ref.offset)
                yield json.loads(handle.readline())

    def sample_field(self, dataset: str, metric: str, model: str, name: str) -> dict[Unit, str]:
        """One text field the scores file of (dataset, metric, model) shows per sample (e.g. speech_transcript)."""
        return {unit: item[name] for item in read_jsonl(RunStore(self.path).scores_path(dataset, metric, model))
                if (unit := _unit(item)) is not None and isinstance(item.get(name), str)}

    def sample_scores(self, dataset: str, metric: str, model: str) -> dict[Unit, tuple[Optional[float], Optional[str]]]:
        """(score, why it has none) of each (sample id, repeat) of one (dataset, metric, model), the last line
        of each: a judge failure, or the reason the metric could not score the sample (no reference, …)."""
        found = {}
        for item in read_jsonl(RunStore(self.path).scores_path(dataset, metric, model)):
            unit = _unit(item)
            if unit is not None:
                score = item.get("score")
                found[unit] = (float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
                               item.get("judge_failed") or (item.get("reason") if score is None else None) or None)
        return found


    def sample_readings(self, dataset: str, metric: str, model: str) -> dict[Unit, tuple[list[str], Optional[str]]]:
        """(the reading rules that changed the reply, what was scored) of each sample a metric read carefully
        or through the judge: the text of a transcript or translation, the label of a label reply."""
        found = {}
        for item in read_jsonl(RunStore(self.path).scores_path(dataset, metric, model)):
            unit, rules = _unit(item), item.get("reading")
            if unit is not None and isinstance(rules, list) and rules:
                scored = item.get("read", item.get("prediction_label", item.get("extracted")))
                found[unit] = ([str(r) for r in rules], None if scored is None else str(scored))
        return found


class RecordRef(NamedTuple):
    """A record's place in its file, and what the plots read from every record."""

    offset: int
    failed: bool
    latency: Optional[float]  # answered by the endpoint, not by the cache
    ttft: Optional[float] = None   # a streamed reply's first text ...
    ttfa: Optional[float] = None   # ... and first audio


def _seconds(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _unit(item: dict[str, Any]) -> Optional[Unit]:
    """(id, repeat) of a line: every repeat of a sample is a record of its own (scores/ leave out repeat 0)."""
    if "id" not in item:
        return None
    repeat = item.get("repeat") or 0
    return str(item["id"]), repeat if isinstance(repeat, int) else 0


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(byte offset, object) of each whole JSON object line, skipping a line cut short by a crash."""
    if not path.exists():
        return
    check_regular(path, "records file")
    with path.open("rb") as handle:
        offset = 0
        for line in handle:
            try:
                item = json.loads(line)
            except (ValueError, RecursionError):
                item = None
            if isinstance(item, dict):
                yield offset, item
            offset += len(line)


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
