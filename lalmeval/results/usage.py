"""Tokens the servers reported, summed over records and judge replies, and what they cost under a price per million."""

from __future__ import annotations

from collections import Counter
from contextvars import ContextVar
from typing import Any, Iterable, Mapping, Optional

PROMPT, COMPLETION, TOTAL = "prompt_tokens", "completion_tokens", "total_tokens"
PROMPT_AUDIO, COMPLETION_AUDIO = "prompt_audio_tokens", "completion_audio_tokens"
MILLION = 1_000_000


class Usage:
    """Token counts summed over replies, and how many replies reported none (their tokens are unknown, not 0)."""

    def __init__(self) -> None:
        self.tokens: Counter[str] = Counter()
        self.replies = 0
        self.unreported = 0

    def add(self, usage: Optional[Mapping[str, Any]], answered: bool = True) -> None:
        """One reply's (or record's) usage; without one, an `answered` request counts as unreported (a
        sample that was never sent, or answered from the cache, spent nothing)."""
        if not usage:
            self.replies += answered
            self.unreported += answered
            return
        self.replies += 1
        for name, count in usage.items():
            if isinstance(count, int) and not isinstance(count, bool):
                self.tokens[name] += count

    def merge(self, other: "Usage") -> None:
        self.tokens.update(other.tokens)
        self.replies += other.replies
        self.unreported += other.unreported

    @property
    def total(self) -> int:
        """Prompt plus completion tokens (total_tokens when that is all a server reports)."""
        both = self.tokens[PROMPT] + self.tokens[COMPLETION]
        return both or self.tokens[TOTAL]

    def to_json(self) -> dict[str, int]:
        """{prompt_tokens, completion_tokens, total_tokens, other reported counts..., replies, unreported}."""
        out = {PROMPT: self.tokens[PROMPT], COMPLETION: self.tokens[COMPLETION], TOTAL: self.tokens[TOTAL] or self.total}
        out.update({k: v for k, v in sorted(self.tokens.items()) if k not in out})
        return {**out, "replies": self.replies, "unreported": self.unreported}

    @classmethod
    def of(cls, entries: Iterable[Mapping[str, Any]]) -> "Usage":
        """The sum of to_json() entries (a run's total from its parts)."""
        found = cls()
        for entry in entries:
            found.replies += int(entry.get("replies") or 0)
            found.unreported += int(entry.get("unreported") or 0)
            found.tokens.update({k: v for k, v in entry.items() if k.endswith("_tokens") and isinstance(v, int)})
        return found


# The judge usage of the score being computed: the Engine sets one per model, the judge adds each reply's
# usage to it. A context variable reaches every scoring task the Engine starts for that model, and only those.
JUDGE_USAGE: ContextVar[Optional[Usage]] = ContextVar("judge_usage", default=None)


def cost(usage: Mapping[str, Any], price: Optional[Mapping[str, Any]]) -> Optional[float]:
    """What `usage` (to_json() counts) costs under `price` (config Price as a dict); None without a price.

    Audio tokens are part of the prompt (completion) tokens, as OpenAI reports them; they are priced
    at audio_*_per_mtok when given and at the text price otherwise. Computed from whole token
    counts, so a run's cost is the same whichever order its replies came in."""
    if price is None:
        return None
    prompt, completion = int(usage.get(PROMPT) or 0), int(usage.get(COMPLETION) or 0)
    audio_in, audio_out = int(usage.get(PROMPT_AUDIO) or 0), int(usage.get(COMPLETION_AUDIO) or 0)
    audio_in_price = price.get("audio_input_per_mtok")
    audio_out_price = price.get("audio_output_per_mtok")
    text_in = prompt - audio_in if audio_in_price is not None else prompt
    text_out = completion - audio_out if audio_out_price is not None else completion
    amount = text_in * price["input_per_mtok"] + text_out * price["output_per_mtok"]
    amount += (audio_in * audio_in_price if audio_in_price is not None else 0) + (audio_out * audio_out_price if audio_out_price is not None else 0)
    return amount / MILLION


def run_totals(scores: list[dict[str, Any]], judge: Optional[Usage], prices: Mapping[str, Optional[Mapping[str, Any]]],
               judge_price: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """final_scores.json "usage" (and "cost" when priced), adding each score entry's "cost" in place.

    A model's tokens are counted once per dataset (every metric of a dataset scores the same records);
    the judge's are its replies in this run. A run is priced when every model that used tokens has a price."""
    by_model: dict[str, Usage] = {}
    seen: set[tuple[str, str]] = set()
    for score in scores:
        usage = score.get("usage")
        if not usage:
            continue
        amount = cost(usage, prices.get(score["model"]))
        if amount is not None:
            judged = cost(score.get("judge_usage") or {}, judge_price) if score.get("judge_usage") else 0.0
            score["cost"] = amount + (judged or 0.0)
        if (score["dataset"], score["model"]) not in seen:
            seen.add((score["dataset"], score["model"]))
            by_model.setdefault(score["model"], Usage()).merge(Usage.of([usage]))
    parts = [u.to_json() for u in by_model.values()] + ([judge.to_json()] if judge is not None and judge.replies else [])
    out: dict[str, Any] = {"usage": {**Usage.of(parts).to_json(), "models": {m: u.to_json() for m, u in by_model.items()}}}
    if judge is not None and judge.replies:
        out["usage"]["judge"] = judge.to_json()
    model_costs = {m: cost(u.to_json(), prices.get(m)) for m, u in by_model.items()}
    judge_cost = cost(judge.to_json(), judge_price) if judge is not None and judge.replies else 0.0
    if model_costs and all(c is not None for c in model_costs.values()) and judge_cost is not None:
        out["cost"] = {"total": sum(model_costs.values()) + judge_cost, "models": model_costs,
                       **({"judge": judge_cost} if judge is not None and judge.replies else {})}
    return out
