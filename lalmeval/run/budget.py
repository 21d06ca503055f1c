"""max_cost and max_run_tokens: a run stops cleanly once it has used its budget.

Every record's reported usage counts (stored records a resumed run reuses too: the budget is the
run's, not one invocation's), and so does every judge reply. Once the tokens or their cost reach
the limit, no new request starts, those in flight finish, and what was not sent is left as not run
for a resume, after the limit is raised.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from lalmeval.results.records import Record
from lalmeval.results.usage import Usage, cost

FIX = "Raise max_cost / max_run_tokens in the config (or remove them)"
STOPPED = "stopped at the budget"


class BudgetWatch:
    """Sums usage per model and for the judge; calls `stop` once when the run reaches max_cost or max_run_tokens."""

    def __init__(self, max_cost: Optional[float], max_tokens: Optional[int], prices: Mapping[str, Optional[Mapping[str, Any]]],
                 judge_price: Optional[Mapping[str, Any]], stop: Callable[[], None]):
        self.max_cost, self.max_tokens, self.prices, self.judge_price = max_cost, max_tokens, prices, judge_price
        self._stop = stop
        self.models: dict[str, Usage] = {}
        self.judge = Usage()
        self.stopped: Optional[str] = None   # the one line saying why the run stopped itself

    def listener(self, model: str) -> Callable[[Record], None]:
        """Listener of one pass's records (`model` names whose price applies)."""
        usage = self.models.setdefault(model, Usage())

        def observe(record: Record) -> None:
            if record.usage:
                usage.add(record.usage)
                self._check()

        return observe

    def observe_judge(self, usage: Optional[dict[str, int]]) -> None:
        """Listener of the judge's replies."""
        if usage:
            self.judge.add(usage)
            self._check()

    def spent(self) -> tuple[int, float]:
        """(tokens, cost) used so far; the cost counts only what has a price."""
        tokens = sum(u.total for u in self.models.values()) + self.judge.total
        amount = sum(cost(u.to_json(), self.prices.get(m)) or 0.0 for m, u in self.models.items())
        return tokens, amount + (cost(self.judge.to_json(), self.judge_price) or 0.0)

    def _check(self) -> None:
        if self.stopped is not None:
            return
        tokens, amount = self.spent()
        if self.max_tokens is not None and tokens >= self.max_tokens:
            self.stopped = f"{STOPPED}: {tokens} tokens used, max_run_tokens is {self.max_tokens}"
        elif self.max_cost is not None and amount >= self.max_cost:
            self.stopped = f"{STOPPED}: cost {amount:.6g} reached max_cost {self.max_cost:g}"
        if self.stopped is not None:
            self._stop()
