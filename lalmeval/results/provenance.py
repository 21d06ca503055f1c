"""What a score pools beyond fresh answers from one server: cached replies (and the runs that asked for
them) and replicas. Read from final_scores.json score entries by the console table and report.html."""

from __future__ import annotations

from typing import Any, Sequence

from lalmeval.results.cache import EARLIER_RUN


def cached_answers(details: dict[str, Any]) -> int:
    """How many of a score's answers came from the inference cache (details.from_cache)."""
    found = details.get("from_cache")
    return int(found.get("answers") or 0) if isinstance(found, dict) else 0


def provenance_notes(scores: Sequence[dict[str, Any]]) -> list[str]:
    """What a score mixes beyond one fresh server: replies from the cache (and the runs that asked for them) and
    replicas pooled into one model. One line per (model, dataset) or model, from final_scores.json score entries."""
    notes: dict[str, None] = {}
    for score in scores:
        details = score.get("details") or {}
        found = details.get("from_cache")
        if cached_answers(details):
            runs = ", ".join(f"{count} from {run if run == EARLIER_RUN else 'run ' + run}" for run, count in found.get("runs", {}).items())
            notes[f"{score['model']} on {score['dataset']}: {found['answers']} answer(s) came from the inference cache ({runs}), not from the server"] = None
        replicas = details.get("replicas")
        if isinstance(replicas, list) and len(replicas) > 1:
            notes[f"{score['model']}: one model served by {len(replicas)} replicas whose answers are pooled into one score: {', '.join(map(str, replicas))}"] = None
    return list(notes)
