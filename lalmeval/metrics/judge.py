"""llm_judge_binary and llm_judge_detailed: an LLM grades each answer; failures are counted, never 0.

The dataset's judge template (runspec `judge_template`) says what the judge is shown, which
settings its requests carry, how its verdict is read and how ratings become the printed score.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import replace
from typing import Any, ClassVar, Optional

from lalmeval.config.schema import Config
from lalmeval.errors import UserError
from lalmeval.inference.client import RequestFailed
from lalmeval.inference.protocols import ReplyError
from lalmeval.judging.judge import fields_for, judge_failure, judge_fields
from lalmeval.judging.templates import JudgeTemplate
from lalmeval.metrics.base import EMPTY_REFERENCE, METRICS, Metric, SampleScore, sample_stats, unscored
from lalmeval.results.records import Record
from lalmeval.stats import SampleStats, Uncertainty, ratio, t_interval, wilson
from lalmeval.judging.verdicts import read_verdict
from lalmeval.metrics.peer_text import peer_name, side_by_side
from lalmeval.judging.verdicts import STATEMENT, Reading, Verdict


class LLMJudge(Metric):
    """Fills the dataset's judge template for each record, asks the judge and reads its verdict."""

    uses_template: ClassVar[bool] = True
    display_fields = frozenset({"judgment", "turns"})
    reads_protocol = True

    @classmethod
    def check(cls, config: Config) -> None:
        if config.judge_properties is None:
            raise UserError(f"metric '{cls.name}' needs judge_properties in the config (see sample_config.yaml)")

    @property
    def template(self) -> JudgeTemplate:
        return self.context.judge.template(self.dataset.name, self.name)

    @property
    def verdict(self) -> Verdict:
        """How replies are read: the template's verdict, or its peer's reading under that peer's protocol."""
        return self.template.verdict_under(self.dataset.spec.protocol)

    def score_record(self, record: Record) -> SampleScore:
        raise NotImplementedError("judges score asynchronously")

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        return list(await asyncio.gather(*(self._judge(r) for r in records)))

    async def _judge(self, record: Record) -> SampleScore:
        if record.extra.get("turns"):
            return await self._judge_turns(record)
        fields = fields_for(record, self.template.stand_ins)
        fields["history"] = fields["history_with_references"] = self.template.history_text([], False)
        return await self._judge_one(fields)

    async def _judge_turns(self, record: Record) -> SampleScore:
        """A dialogue: every turn judged with the turns before it as context; the sample scores their mean."""
        judged = await asyncio.gather(*(self._judge_one(view) for view in self._turn_views(record)))
        failed = [(i, x) for i, x in enumerate(judged) if x.get("judge_failed")]
        if failed:
            index, item = failed[0]
            return {"score": None, "judge_failed": f"turn {index + 1}: {item['judge_failed']}", "turns": judged}
        unscorable = [x for x in judged if x["score"] is None]
        if unscorable:  # a turn without a reference a binary judge needs
            return unscored(unscorable[0]["reason"], turns=judged)
        ratings = [x["rating"] for x in judged]
        return {"score": self.template.printed(sum(ratings) / len(ratings)), "rating": sum(ratings) / len(ratings),
                "turn_scores": [self.template.printed(r) for r in ratings], "turns": judged}

    def _turn_views(self, record: Record) -> list[dict[str, str]]:
        """What the judge is shown of each turn: with a template history section, the turn itself and the
        conversation before it written as the template says; otherwise the turn after the earlier ones."""
        template, turns = self.template, record.extra["turns"]
        references = _turn_references(record.reference, len(turns))
        replies = [self.postprocessor.process(turn["reply"]) for turn in turns]
        earlier = [(t["prompt"], reply, ref or "") for t, reply, ref in zip(turns, replies, references)]
        views = []
        for i, turn in enumerate(turns):
            question = turn["prompt"] if template.history else _in_context(turns, i)
            view = judge_fields(question, references[i], record.transcript, replies[i], template.stand_ins)
            view.update(turn_number=str(i + 1), history=template.history_text(earlier[:i], False),
                        history_with_references=template.history_text(earlier[:i], True))
            views.append(view)
        return views

    async def _judge_one(self, fields: dict[str, str]) -> SampleScore:
        template, judge = self.template, self.context.judge
        variant = template.variant_for(bool(fields["reference"]), bool(fields["transcript"]))
        if variant is None:
            if not fields["reference"] and template.missing(False).startswith("no reference"):
                return unscored(EMPTY_REFERENCE)  # a judge that needs a reference: lalmeval's rule for every metric
            return {"score": None, "judge_failed": template.missing(bool(fields["reference"]))}
        texts, verdict = template.render(variant, fields), self.verdict
        read: dict[str, Reading] = {}   # the reply ask() found usable is read once, not again below

        def usable(text: str) -> bool:
            read[text] = read_verdict(text, verdict)
            return read[text].problem is None

        try:
            reply, cached = await judge.ask(texts.prompt, usable=usable, system=texts.system, generation=template.generation)
        except RequestFailed as exc:
            return {"score": None, "variant": variant, "judge_failed": judge_failure(exc)}
        except ReplyError as exc:
            return {"score": None, "variant": variant, "judge_failed": f"judge reply unusable: {exc}"}
        reading = read[reply] if reply in read else read_verdict(reply, verdict)
        # A peer's reading: lalmeval's own grammar reads the same reply too, for the number printed beside the peer's.
        own = {"own_rating": read_verdict(reply, replace(verdict, read=STATEMENT)).value} if verdict.read != STATEMENT else {}
        if reading.problem is not None:
            return {"score": None, "variant": variant, "judge_failed": reading.problem, "judgment": reply, "cached": cached, **own}
        noted = {"verdict_note": reading.note} if reading.note else {}  # a revision that replaced an earlier rating
        return {"score": template.printed(reading.value), "rating": reading.value, "variant": variant, "judgment": reply, "cached": cached,
                **noted, **own}

    def sample_stats(self, items: list[SampleScore]) -> Optional[SampleStats]:
        return sample_stats(items, lambda x: (x["score"], 1.0), ratio())

    def uncertainty(self, items: list[SampleScore], score: Optional[float]) -> Uncertainty:
        """Binary judge: Wilson score interval; a rating scale: Student-t interval of the printed scores."""
        if score is None or self.context.resamples <= 0:
            return Uncertainty()
        scored = [x for x in items if x["score"] is not None]
        if self.template.binary:
            return wilson(sum(x["rating"] for x in scored), len(scored))
        return t_interval([x["score"] for x in scored])

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        scored = [x for x in items if x["score"] is not None]
        failures = Counter(x["judge_failed"].split(":")[0] for x in items if x.get("judge_failed"))
        judge, template = self.context.judge, self.template
        details: dict[str, Any] = {
            "num_judge_failed": sum(failures.values()), "judged": len(scored),
            "judge_model": judge.props.judge_model, "prompt_model": judge.prompt_model,
            "judge_template": template.identity(), "judge_params": judge.request_params(template.generation),
            "variants": dict(Counter(x["variant"] for x in items if "variant" in x)),
        }
        if failures:
            details["judge_failures"] = dict(failures)
        if not template.binary:
            details["raw_mean"] = sum(x["rating"] for x in scored) / len(scored) if scored else None
        per_turn = [x["turn_scores"] for x in items if x.get("turn_scores") and x["score"] is not None]
        if per_turn:  # each turn's mean printed score over the dialogues
            details["turns"] = [sum(t[i] for t in per_turn if len(t) > i) / sum(1 for t in per_turn if len(t) > i)
                                for i in range(max(map(len, per_turn)))]
        value = sum(x["score"] for x in scored) / len(scored) if scored else None
        if scored and template.round_mean is not None:  # printed as the peer prints it: its mean rating rounded first
            value = template.printed_mean(sum(x["rating"] for x in scored) / len(scored))
        if self.verdict.read != STATEMENT:
            details["lalmeval"] = self._own_details(items, value)
        return value, details

    def _own_details(self, items: list[SampleScore], value: Optional[float]) -> dict[str, Any]:
        """lalmeval's own number from the same replies: its verdict grammar instead of the peer's reading, over every
        reply either reading reads (a reply only the grammar reads counts there, one it cannot read does not)."""
        own = [x["own_rating"] for x in items if x.get("own_rating") is not None]
        mean = self.template.printed(sum(own) / len(own)) if own else None  # lalmeval's own: no peer rounding
        step = (f"verdict reading: the judge's replies read as the peer reads them ({self.verdict.read}); "
                "lalmeval reads the same replies by its verdict grammar")
        peer = peer_name(self.dataset) or "the template's peer"
        return {**side_by_side(peer, value, mean, step), "read": len(own)}


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
    """Correct / incorrect (a binary verdict), reported as percent correct."""

    name = "llm_judge_binary"


@METRICS.register("llm_judge_detailed")
class DetailedJudge(LLMJudge):
    """A rating scale (0-5 by default), reported as the template maps it (0-100 by default) with the raw mean in details."""

    name = "llm_judge_detailed"
