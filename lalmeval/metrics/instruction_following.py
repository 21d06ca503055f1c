"""instruction_following: IFEval's rule checks over each reply (VoiceBench ifeval, AU-Harness, Kimi's vb-ifeval).

The reference is the row's instruction_id_list and kwargs (a runspec target_column list of those two
columns). Four accuracies are computed as the IFEval release does — prompt level (every instruction of
the reply followed) and instruction level (over all instructions), each strict and loose (the reply
also read without its first or last line and without '*') — and the score is their mean, the figure
AU-Harness and VoiceBench report as "final". `details` holds the four. The rules are in ifeval_rules.py.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any, Optional

import numpy as np

from lalmeval.catalog.runspecs import Dataset
from lalmeval.config.schema import Config
from lalmeval.errors import UserError
from lalmeval.metrics.base import METRICS, Metric, SampleScore, sample_stats
from lalmeval.metrics.ifeval_rules import RULES, follows
from lalmeval.results.records import Record
from lalmeval.stats import SampleStats

# Per-sample statistics: strict prompt, strict instructions followed, loose prompt, loose instructions, instructions, 1.
_COLUMNS = ("strict_prompt", "strict_followed", "loose_prompt", "loose_followed", "instructions")


def _final(sums: np.ndarray) -> np.ndarray:
    """Mean of the four accuracies (0-100) from column sums; nan where there is nothing to divide by."""
    with np.errstate(invalid="ignore", divide="ignore"):
        prompts, instructions = sums[:, 5], sums[:, 4]
        parts = [sums[:, 0] / prompts, sums[:, 1] / instructions, sums[:, 2] / prompts, sums[:, 3] / instructions]
    return 25.0 * sum(parts)


def instructions_of(reference: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The instruction ids and their arguments (None values dropped) from a {instruction_id_list, kwargs} reference."""
    data = json.loads(reference)
    ids = list(data["instruction_id_list"])
    raw = data.get("kwargs") or [{} for _ in ids]
    if isinstance(raw, str):
        raw = json.loads(raw)
    args = [{k: v for k, v in (a or {}).items() if v is not None} for a in raw]
    if len(args) != len(ids):
        raise ValueError(f"{len(ids)} instructions but {len(args)} kwargs")
    return ids, args


@METRICS.register("instruction_following")
class InstructionFollowing(Metric):
    """Mean of IFEval's strict and loose, prompt- and instruction-level accuracies (0-100)."""

    name = "instruction_following"
    display_fields = frozenset({"strict", "loose"})

    @classmethod
    def check(cls, config: Config) -> None:
        if importlib.util.find_spec("langdetect") is None:
            raise UserError("metric 'instruction_following' needs the langdetect package for IFEval's language checks: pip install langdetect")

    @classmethod
    def check_dataset(cls, dataset: Dataset) -> None:
        if not isinstance(dataset.spec.target_column, list):
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': metric 'instruction_following' reads the instructions and their arguments: "
                            'set target_column to the two columns, e.g. ["instruction_id_list", "kwargs"]')

    def score_record(self, record: Record) -> SampleScore:
        try:
            ids, args = instructions_of(record.reference or "")
        except (ValueError, KeyError, TypeError) as exc:
            return {"score": None, "reason": f"unreadable instructions: {exc}"}
        unknown = [i for i in ids if i not in RULES]
        if unknown or not ids:
            return {"score": None, "reason": f"unknown instruction {unknown[0]}" if unknown else "no instructions"}
        reply = record.prediction or ""
        strict = [follows(reply, i, a, loose=False) for i, a in zip(ids, args)]
        loose = [follows(reply, i, a, loose=True) for i, a in zip(ids, args)]
        row = (float(all(strict)), float(sum(strict)), float(all(loose)), float(sum(loose)), float(len(ids)))
        return {"score": float(_final(np.asarray([[*row, 1.0]]))[0]), "row": row, "strict": strict, "loose": loose}

    def sample_stats(self, items: list[SampleScore]) -> Optional[SampleStats]:
        return sample_stats(items, lambda x: (*x["row"], 1.0), _final)

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        rows = np.asarray([[*x["row"], 1.0] for x in items if x.get("score") is not None])
        if not len(rows):
            return None, {"scored": 0, "unscorable": len(items)}
        sums = rows.sum(axis=0)
        details = {"strict_prompt": 100.0 * sums[0] / sums[5], "strict_instruction": 100.0 * sums[1] / sums[4],
                   "loose_prompt": 100.0 * sums[2] / sums[5], "loose_instruction": 100.0 * sums[3] / sums[4],
                   "scored": len(rows), "unscorable": len(items) - len(rows)}
        return float(_final(sums[None, :])[0]), details
