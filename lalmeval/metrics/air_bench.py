"""llm_judge_air_bench: AIR-Bench Chat's pairwise rating, as lmms-eval's air_bench_chat tasks score it.

The judge sees the audio's description (the dataset's meta_info, as transcript_column), the question,
the reference answer and the model's answer as "Assistant 1" and "Assistant 2", and rates both 1-10.
It is asked twice, with the two answers in either order (against position bias); the sample's score
is the mean of the model's two ratings, and the dataset's the mean over samples, on the 1-10 scale.
lmms-eval counts a judgment it cannot parse as 0; here it is a judge failure, counted and left out
(a failure is never a score). The question the judge sees is the dataset's question: the text the model
was sent without the runspec's prompt_template around it (lmms-eval shows doc["question"], not its
post-prompt). The judge is asked as lmms-eval's get_eval asks: temperature 0, at most 1024 tokens.

Under a peer protocol (lmms, lmms_v0.3) the second judgment is read as lmms-eval reads it, by its first
number alone ("7" rates the model 7 there); lalmeval's own reading wants both ratings of each judgment,
and its number is printed beside the peer's.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from typing import Any, Optional

from lalmeval.catalog.runspecs import Dataset
from lalmeval.config.schema import Config
from lalmeval.errors import UserError
from lalmeval.inference.client import RequestFailed
from lalmeval.inference.protocols import ReplyError
from lalmeval.judging.judge import judge_failure
from lalmeval.metrics.base import METRICS, MeanMetric, SampleScore
from lalmeval.metrics.peer_text import peer_name, side_by_side
from lalmeval.results.records import Record

# The evaluation prompt of the AIR-Bench repository, as lmms-eval's air_bench/utils.py sends it.
PROMPT = (
    "You are a helpful and precise assistant for checking the quality of the answer.\n"
    "[Detailed Audio Description]\nXAudioX\n[Question]\nXQuestionX\n"
    "[The Start of Assistant 1s Answer]\nXAssistant1X\n[The End of Assistant 1s Answer]\n"
    "[The Start of Assistant 2s Answer]\nXAssistant2X\n[The End of Assistant 2s Answer]\n[System]\n"
    "We would like to request your feedback on the performance of two AI assistants in response to the user question "
    "and audio description displayed above. AI assistants are provided with detailed audio descriptions and questions.\n"
    "Please rate the helpfulness, relevance, accuracy, and comprehensiveness of their responses. "
    "Each assistant receives an overall score on a scale of 1 to 10, where a higher score indicates better overall performance. "
    "Please output a single line containing only two values indicating the scores for Assistant 1 and 2, respectively. "
    "The two scores are separated by a space. Please only output the 2 required number and no text."
)
_SCORE = re.compile(r"\b(?:[1-9]|10)\b")
GENERATION = {"temperature": 0.0, "max_tokens": 1024}  # lmms-eval's get_eval payload


def fill(description: str, question: str, first: str, second: str) -> str:
    """The prompt with its four slots filled (plain replacement: the texts may hold braces)."""
    return (PROMPT.replace("XAudioX", description).replace("XQuestionX", question)
            .replace("XAssistant1X", first).replace("XAssistant2X", second))


def ratings(judgment: str) -> Optional[tuple[float, float]]:
    """The two 1-10 ratings of a judgment (periods dropped first, as AIR-Bench reads them), or None."""
    found = _SCORE.findall(judgment.strip().replace(".", ""))
    return (float(found[0]), float(found[1])) if len(found) >= 2 else None


def first_rating(judgment: str) -> Optional[float]:
    """The first 1-10 number of a judgment (lmms-eval's reading of the judgment with the model as Assistant 1)."""
    found = _SCORE.findall(judgment.strip().replace(".", ""))
    return float(found[0]) if found else None


def model_score(first: str, second: str, lenient: bool) -> Optional[float]:
    """The mean of the model's two ratings: its rating as Assistant 2 in the first judgment, as Assistant 1 in the
    second; lenient (the peer's reading) takes the second judgment's first number even when it holds no other."""
    a = ratings(first)
    b = first_rating(second) if lenient else (ratings(second) or (None,))[0]
    return None if a is None or b is None else (a[1] + b) / 2.0


def question_of(prompt: str, template: Optional[str]) -> str:
    """The dataset's question: the prompt without what the runspec's prompt_template wrote around {instruction}."""
    before, found, after = (template or "").partition("{instruction}")
    if found and "{" not in before + after:  # only a fixed frame can be taken off again
        if before and prompt.startswith(before):
            prompt = prompt[len(before):]
        if after and prompt.endswith(after):
            prompt = prompt[: -len(after)]
    return prompt.strip()


@METRICS.register("llm_judge_air_bench")
class AirBenchJudge(MeanMetric):
    """Mean of the model's two pairwise 1-10 ratings against the reference (AIR-Bench Chat)."""

    name = "llm_judge_air_bench"
    display_fields = frozenset({"judgments"})
    reads_protocol = True  # a peer protocol reads the second judgment as lmms-eval does

    @classmethod
    def check(cls, config: Config) -> None:
        if config.judge_properties is None:
            raise UserError(f"metric '{cls.name}' needs judge_properties in the config (see sample_config.yaml)")

    @classmethod
    def check_dataset(cls, dataset: Dataset) -> None:
        if not dataset.spec.transcript_column:
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': metric '{cls.name}' shows the judge the audio's description: set transcript_column (AIR-Bench: meta_info)")

    def score_record(self, record: Record) -> SampleScore:
        raise NotImplementedError("judges score asynchronously")

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        return list(await asyncio.gather(*(self._judge(r) for r in records)))

    async def _judge(self, record: Record) -> SampleScore:
        reference, answer = (record.reference or "").strip(), (record.prediction or "").strip()
        if not reference:
            return {"score": None, "judge_failed": "no reference answer to judge against"}
        description, question = (record.transcript or "").strip(), question_of(record.prompt, self.dataset.spec.prompt_template)
        try:
            second_read = first_rating if self._peer else ratings
            first, second = await asyncio.gather(self._ask(fill(description, question, reference, answer), ratings),
                                                  self._ask(fill(description, question, answer, reference), second_read))
        except RequestFailed as exc:
            return {"score": None, "judge_failed": judge_failure(exc)}
        except ReplyError as exc:
            return {"score": None, "judge_failed": f"judge reply unusable: {exc}"}
        score = model_score(first, second, lenient=self._peer)
        own = {"own_score": model_score(first, second, lenient=False)} if self._peer else {}
        if score is None:
            return {"score": None, "judge_failed": "unparseable judgment", "judgments": [first, second], **own}
        return {"score": score, "judgments": [first, second], **own}

    @property
    def _peer(self) -> bool:
        return peer_name(self.dataset) is not None

    async def _ask(self, text: str, read: Any) -> str:
        reply, _ = await self.context.judge.ask(text, usable=lambda reply: read(reply) is not None, generation=GENERATION)
        return reply

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        scored = [x["score"] for x in items if x.get("score") is not None]
        failures = Counter(x["judge_failed"].split(":")[0] for x in items if x.get("judge_failed"))
        details: dict[str, Any] = {"scale": "1-10", "judged": len(scored), "num_judge_failed": sum(failures.values()),
                                   "judge_model": self.context.judge.props.judge_model if self.context.judge else None}
        if failures:
            details["judge_failures"] = dict(failures)
        value = sum(scored) / len(scored) if scored else None
        if self._peer:  # lalmeval's own reading of the same judgments: both ratings of each
            own = [x["own_score"] for x in items if x.get("own_score") is not None]
            step = "judgment reading: the peer takes the second judgment's first number alone; lalmeval wants both ratings"
            details["lalmeval"] = side_by_side(peer_name(self.dataset) or "", value, sum(own) / len(own) if own else None, step)
        return value, details
