"""llm_judge_binary and llm_judge_detailed: an LLM grades each answer; failures are counted, never 0."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import replace
from typing import Any, ClassVar, Optional

from lalmeval.config import Config
from lalmeval.errors import UserError
from lalmeval.inference.client import RequestFailed
from lalmeval.inference.protocols import ReplyError
from lalmeval.judge import fields_for, judge_failure, parse_rating
from lalmeval.metrics.base import EMPTY_REFERENCE, METRICS, Metric, SampleScore, sample_stats, unscored
from lalmeval.records import Record
from lalmeval.stats import SampleStats, Uncertainty, ratio, t_interval, wilson


class LLMJudge(Metric):
    """Fills the variant's template for each record, asks the judge, parses 'Rating: N'."""

    scale: ClassVar[int] = 1
    display_fields = frozenset({"judgment", "turns"})

    @classmethod
    def check(cls, config: Config) -> None:
        if config.judge_properties is None:
            raise UserError(f"metric '{cls.name}' needs judge_properties in the config (see sample_config.yaml)")

    def variant(self, record: Record) -> Optional[str]:
        has_reference = bool(record.reference and record.reference.strip())
        base = "reference" if has_reference else "open"
        return base + "_transcript" if record.transcript else base

    def score_record(self, record: Record) -> SampleScore:
        raise NotImplementedError("judges score asynchronously")

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        return list(await asyncio.gather(*(self._judge(r) for r in records)))

    async def _judge(self, record: Record) -> SampleScore:
        if record.extra.get("turns"):
            return await self._judge_turns(record)
        return await self._judge_one(record)

    async def _judge_turns(self, record: Record) -> SampleScore:
        """A dialogue: every turn judged with the turns before it as context; the sample scores their mean."""
        turns = record.extra["turns"]
        references = _turn_references(record.reference, len(turns))
        views = [replace(record, prompt=_in_context(turns, i), prediction=self.postprocessor.process(turn["reply"]), reference=references[i], extra={})
                 for i, turn in enumerate(turns)]
        judged = await asyncio.gather(*(self._judge_one(view) for view in views))
        failed = [(i, x) for i, x in enumerate(judged) if x.get("judge_failed")]
        if failed:
            index, item = failed[0]
            return {"score": None, "judge_failed": f"turn {index + 1}: {item['judge_failed']}", "turns": judged}
        unscorable = [x for x in judged if x["score"] is None]
        if unscorable:  # a turn without a reference a binary judge needs
            return unscored(unscorable[0]["reason"], turns=judged)
        return {"score": sum(x["score"] for x in judged) / len(judged), "turn_scores": [x["score"] for x in judged], "turns": judged}

    async def _judge_one(self, record: Record) -> SampleScore:
        judge = self.context.judge
        variant = self.variant(record)
        if variant is None:  # a binary judge needs a reference: lalmeval's rule for every metric
            return unscored(EMPTY_REFERENCE)
        template = judge.template(self.name, variant)
        if template is None:
            return {"score": None, "variant": variant, "judge_failed": f"no '{variant}' prompt for {self.name}"}
        try:
            reply, cached = await judge.ask(template.format_map(fields_for(record)), usable=lambda text: self._problem(text) is None)
        except RequestFailed as exc:
            return {"score": None, "variant": variant, "judge_failed": judge_failure(exc)}
        except ReplyError as exc:
            return {"score": None, "variant": variant, "judge_failed": f"judge reply unusable: {exc}"}
        problem = self._problem(reply)
        if problem is not None:
            return {"score": None, "variant": variant, "judge_failed": problem, "judgment": reply, "cached": cached}
        return {"score": parse_rating(reply), "variant": variant, "judgment": reply, "cached": cached}

    def _problem(self, judgment: str) -> Optional[str]:
        """Why a judgment cannot be used, or None when it holds a rating on this metric's scale."""
        rating = parse_rating(judgment)
        if rating is None:
            return "unparseable judgment"
        return None if 0 <= rating <= self.scale else f"rating {rating:g} outside 0-{self.scale}"

    def sample_stats(self, items: list[SampleScore]) -> Optional[SampleStats]:
        return sample_stats(items, lambda x: (100.0 * x["score"] / self.scale, 1.0), ratio())

    def uncertainty(self, items: list[SampleScore], score: Optional[float]) -> Uncertainty:
        """Binary judge: Wilson score interval; rubric: Student-t interval of the mean (both on 0-100)."""
        ratings = [x["score"] for x in items if x["score"] is not None]
        if score is None or self.context.resamples <= 0:
            return Uncertainty()
        if self.scale == 1:
            return wilson(sum(ratings), len(ratings))
        return t_interval([100.0 * r / self.scale for r in ratings])

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        ratings = [x["score"] for x in items if x["score"] is not None]
        failures = Counter(x["judge_failed"].split(":")[0] for x in items if x.get("judge_failed"))
        judge = self.context.judge
        details: dict[str, Any] = {
            "num_judge_failed": sum(failures.values()), "judged": len(ratings),
            "judge_model": judge.props.judge_model, "prompt_model": judge.prompt_model,
            "variants": dict(Counter(x["variant"] for x in items if "variant" in x)),
        }
        if failures:
            details["judge_failures"] = dict(failures)
        mean = sum(ratings) / len(ratings) if ratings else None
        if self.scale != 1:
            details["raw_mean"] = mean
        per_turn = [x["turn_scores"] for x in items if x.get("turn_scores") and x["score"] is not None]
        if per_turn:  # each turn's mean rating over the dialogues, on the 0-100 scale
            details["turns"] = [100.0 * sum(t[i] for t in per_turn if len(t) > i) / self.scale / sum(1 for t in per_turn if len(t) > i)
                                for i in range(max(map(len, per_turn)))]
        return (100.0 * mean / self.scale if mean is not None else None), details


def _turn_references(reference: Optional[str], count: int) -> list[Optional[str]]:
    """Per-turn references from a JSON list of `count`; a single reference belongs to the last turn.

    An empty list is no reference at all (MT-Bench's categories without references), not the text "[]"."""
    if reference and reference.lstrip().startswith("["):
        try:
            values = json.loads(reference)
        except (ValueError, RecursionError):  # not a list after all: one reference
            values = None
        if values == []:
            return [None] * count
        if isinstance(values, list) and len(values) == count:
            return [str(v) if v not in (None, "") else None for v in values]
    return [None] * (count - 1) + [reference]


def _in_context(turns: list[dict[str, str]], index: int) -> str:
    """What the user asked at turn `index`, after the conversation so far."""
    if index == 0:
        return turns[0]["prompt"]
    earlier = "\n".join(f"User: {t['prompt']}\nAssistant: {t['reply']}" for t in turns[:index])
    return f"(Earlier in this conversation)\n{earlier}\n\n(The user now says)\n{turns[index]['prompt']}"


@METRICS.register("llm_judge_binary")
class BinaryJudge(LLMJudge):
    """Correct / incorrect against the reference, reported as percent correct."""

    name = "llm_judge_binary"
    scale = 1

    def variant(self, record: Record) -> Optional[str]:
        if not (record.reference and record.reference.strip()):
            return None
        return "reference_transcript" if record.transcript else "reference"


@METRICS.register("llm_judge_detailed")
class DetailedJudge(LLMJudge):
    """A 0-5 rubric; reported as 0-100 with the raw 0-5 mean in details."""

    name = "llm_judge_detailed"
    scale = 5
