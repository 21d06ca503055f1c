"""What a score was scored and asked with: its protocol and the settings actually used (details.protocol).

Scoring settings are read from what the metric reported it used (details.normalizer, .unit,
.alignment, .tokenizer, .judge_template), the prompt and generation settings from the plan for
that model on that dataset (prompt rules and overrides applied). Reports print this entry.
"""

from __future__ import annotations

from typing import Any, Optional

from lalmeval.catalog.protocols import resolve
from lalmeval.config.secrets import Redactor, redacted_params, scrub
from lalmeval.results.records import Score
from lalmeval.run.plan import Plan

# details key reported by a metric → key of the printout
_SCORING = (("normalizer", "normalizer"), ("unit", "error_unit"), ("alignment", "alignment"), ("tokenizer", "tokenizer"),
            ("judge_template", "judge_template"))


def protocol_used(plan: Plan, score: Score, redactor: Redactor) -> Optional[dict[str, Any]]:
    """The protocol entry of a score's details (None for a dataset the catalog does not hold)."""
    dataset = plan.catalog.datasets.get(score.dataset)
    if dataset is None:
        return None
    protocol = resolve(dataset.spec.protocol, f"{dataset.source}: dataset '{dataset.name}': protocol")
    out: dict[str, Any] = {"name": protocol.name, "version": protocol.version, "source": protocol.source}
    out.update({shown: score.details[key] for key, shown in _SCORING if score.details.get(key) is not None})
    entry = next((m for m in plan.config.models if m.name == score.model), None)
    if entry is not None:
        settings = plan.prompt_settings(entry, dataset)
        prompt = {"instruction": settings.instruction or dataset.spec.instruction,
                  "instruction_column": dataset.spec.additional_instruction_column,  # a row's own instruction wins
                  "system": "\n\n".join(settings.system_texts) or None, "add_ons": list(settings.add_on_texts) or None}
        out["prompt"] = {k: v for k, v in prompt.items() if v}
        out["generation"] = redacted_params(plan.params(entry, dataset), redactor)
    return scrub(out, redactor, keys=False)
