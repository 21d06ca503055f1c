"""accuracy: exact match after label normalization; for multiple choice, the option the reply chose.

A multiple-choice record carries the options as the model saw them and the gold option's position
(see InferenceJob._record). The reply is read with the runspec's answer_extraction; a reply from
which no option can be read counts as wrong and is reported in details.unextracted. With `llm`,
replies the default extraction cannot read are shown to the judge, which names the option.
"""

from __future__ import annotations

import asyncio
import functools
import re
import string
from collections import Counter
from typing import Any, Callable, Optional

from lalmeval.catalog.runspecs import Dataset
from lalmeval.data.choices import LETTERS, format_options, labels
from lalmeval.errors import UserError
from lalmeval.inference.client import RequestFailed
from lalmeval.judging.judge import judge_failure
from lalmeval.metrics.base import METRICS, SampleScore, empty_reference, unscored
from lalmeval.metrics.peer_text import peer_name, side_by_side
from lalmeval.metrics.percent import PercentCorrect
from lalmeval.metrics.reading import judge_label, reading_details, reading_mode, reading_step
from lalmeval.metrics.refusal import refuses
from lalmeval.postprocess.extraction import extract_choice, focus, mentions
from lalmeval.postprocess.label_reading import (
    LabelReading,
    LabelSet,
    read_label,
    reference_label,
    reference_sets,
)
from lalmeval.postprocess.labels import as_number, option_letter
from lalmeval.postprocess.mmmu_parser import GUESSING
from lalmeval.results.records import Record

JUDGE_EXTRACTION = """A model answered a multiple-choice question. Which option does its answer choose?

[Question]
{question}

[Options]
{options}

[Model answer]
{answer}

End your reply with one line "Answer: X", where X is the letter of the option the answer chooses, or "Answer: none" if it chooses none or several."""

# The line the judge is asked to end with ("Answer: B", "**Answer:** (b)", "Answer: none"); the last one counts.
_JUDGE_ANSWER = re.compile(r"(?m)^[\s*_#>]*(?i:answer)[\s*_]*[:：][\s*_]*[(\[]?\s*([A-Za-z]|(?i:none))\s*[)\]]?[\s*_.]*$")
_JUDGE_NONE = re.compile(r"(?i)^\W*none\W*$")
# The judge speaks of the answer in the first person: "I would say B", "the one I pick is B". Only a
# verb that cannot follow the pronoun ("I is correct") makes a capital I the option letter.
_PRONOUN_I = re.compile(r"(?<![A-Za-z0-9(\[])I(?=\s+(?!(?:is|was|seems|appears|looks|sounds|fits|matches|describes|isn't|wasn't|doesn't|does)\b)[a-z])")


@METRICS.register("accuracy")
class Accuracy(PercentCorrect):
    """Percentage of predictions equal to the reference label (or choosing the gold option)."""

    name = "accuracy"
    display_fields = frozenset({"judgment", "reference_label", "prediction_label"})

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._label_sets: dict[Any, Optional[LabelSet]] = {}

    @property
    def reading(self) -> str:
        return reading_mode(self.dataset, self.context)

    @classmethod
    def check_dataset(cls, dataset: Dataset) -> None:
        spec = dataset.spec
        if (spec.choices or spec.choices_column) and not spec.target_column:
            raise UserError(f"{dataset.source}: dataset '{dataset.name}': multiple choice is scored against a gold answer, "
                            "but target_column is not set (name the column holding the answer)")
        if dataset.spec.answer_extraction == "regex":
            from lalmeval.postprocess.extraction import compile_pattern

            compile_pattern(dataset.spec.answer_pattern)

    @classmethod
    def needs_judge(cls, dataset: Dataset) -> bool:
        return dataset.spec.answer_extraction == "llm" or dataset.spec.reading == "judge"

    @functools.cached_property
    def _own_beside(self) -> bool:
        """A peer protocol whose reading is not lalmeval's: the careful number is kept beside its own (details.lalmeval)."""
        return peer_name(self.dataset) is not None and self.reading != "careful"

    def score_record(self, record: Record) -> SampleScore:
        item = self._scored(record, self.reading)
        if self._own_beside and item["score"] is not None and "own_score" not in item:
            item["own_score"] = self._scored(record, "careful")["score"]
        return item

    def _scored(self, record: Record, reading: str) -> SampleScore:
        """The sample's verdict with the reply read under `reading` (verbatim or careful; judge asks later)."""
        options = record.extra.get("options")
        if options:
            return self._choice(record, options, reading)
        if self.dataset.spec.answer_extraction == "refusal":  # a harmful request: declining it is right, no reference
            refused = refuses(record.prediction or "")
            return {"score": 1.0 if refused else 0.0, "refused": refused}
        if (empty := empty_reference(record.reference)) is not None:
            return unscored(empty)
        peer_match = PEER_MATCHES.get(self.dataset.spec.answer_extraction)
        if peer_match is not None:
            own = self._free(record, reading)
            if own["score"] is None:
                return own
            same = peer_match[0](record.prediction or "", record.reference or "")
            return {**own, "score": 1.0 if same else 0.0, "own_score": own["score"]}
        return self._free(record, reading)

    def _free(self, record: Record, reading: str) -> SampleScore:
        """A free answer against a plain reference, read by lalmeval's rules (labels, numbers, label sets) under `reading`."""
        reference = record.reference.strip()
        letters = len(reference.strip("()., ")) == 1 and option_letter(reference) is not None
        ref = self.postprocessor.label(reference, letters)
        if (empty := empty_reference(reference, ref)) is not None:  # only punctuation: nothing to match
            return unscored(empty)
        pred = self.postprocessor.label(record.prediction or "", letters)
        said = as_number(record.prediction or "")
        if not letters and said is None and reading != "verbatim" and (label_set := self._plain_set(reference)) is not None:
            if (gold := reference_label(reference, label_set)) is not None:
                return _label_verdict(read_label(record.prediction or "", label_set), gold)
        if not letters and (number := as_number(reference)) is not None and said is not None:
            # Both plain numbers: equal values match (a CSV's "3.0" and the answer "3"), as their texts would not.
            return {"score": 1.0 if number == said else 0.0, "reference_label": ref, "prediction_label": pred}
        return {"score": 1.0 if pred == ref else 0.0, "reference_label": ref, "prediction_label": pred}

    def _choice(self, record: Record, options: list[str], mode: str) -> SampleScore:
        gold = record.extra.get("gold")
        if gold is None:
            return {"score": None, "reason": "no gold option"}
        spec = self.dataset.spec
        method = "default" if spec.answer_extraction == "llm" else spec.answer_extraction
        reply = record.prediction or ""
        chosen = extract_choice(method, reply, options, labels(len(options)), spec.answer_pattern)
        if method in GUESSING:
            # A peer parser that guesses a random letter when it reads none: its expected value, 1/k, not one draw;
            # lalmeval's own reading (default extraction, an unread reply wrong) rides along for the side-by-side number.
            own = _verdict(extract_choice("default", reply, options, labels(len(options))), gold)["score"]
            if chosen is None:
                return {"score": 1.0 / len(options), "extracted": None, "gold": LETTERS[gold], "guessed": True, "own_score": own}
            return {**_verdict(chosen, gold), "own_score": own}
        if not spec.choices or mode == "verbatim":
            return _verdict(chosen, gold)
        # A fixed label set (runspec choices): the reply may name one label by a synonym or an inflection
        # ('The speaker sounds happy.' → joy), or by a longer word than an option's text ('subway station' is
        # subwaystation, not subway). That reading stands only where the reply names no option by its letter or
        # position: a letter the reply states decides, as it always did ('sad (A)' stays contradictory).
        if _states_letter(reply, options):
            return _verdict(chosen, gold)
        reading = read_label(reply, self._option_set(options))
        named = options.index(reading.label) if reading.label is not None else None
        if chosen is not None and named in (None, chosen):
            return _verdict(chosen, gold)
        item = _verdict(named, gold)
        item["reading"] = list(reading.rules)
        return item

    def _option_set(self, options: list[str]) -> LabelSet:
        key = tuple(options)
        if key not in self._label_sets:
            self._label_sets[key] = LabelSet.of(options, self.dataset.spec.label_synonyms)
        found = self._label_sets[key]
        assert found is not None
        return found

    def _plain_set(self, reference: str) -> Optional[LabelSet]:
        """The label set a plain reference belongs to (shipped sets, the runspec's label_synonyms), or None."""
        key = ("reference", reference)
        if key not in self._label_sets:
            self._label_sets[key] = reference_sets(reference, self.dataset.spec.label_synonyms)
        return self._label_sets[key]

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        items = await super().score_records(records)
        if self.reading == "judge" and self.context.judge is not None:
            return await self._judge_labels(records, items)
        if self.dataset.spec.answer_extraction != "llm" or self.context.judge is None:
            return items
        asks = [i for i, (r, x) in enumerate(zip(records, items)) if x.get("unextracted")]
        for i, item in zip(asks, await asyncio.gather(*(self._ask_judge(records[i]) for i in asks))):
            items[i] = item
        return items

    async def _ask_judge(self, record: Record) -> SampleScore:
        options = record.extra["options"]
        text = JUDGE_EXTRACTION.format(question=record.prompt, options=format_options(options), answer=record.prediction or "(empty answer)")
        try:
            reply, _ = await self.context.judge.ask(text, usable=lambda judgment: judge_choice(judgment, options)[0])
        except RequestFailed as exc:
            return {"score": None, "judge_failed": judge_failure(exc)}
        readable, chosen = judge_choice(reply, options)
        if not readable:
            return {"score": None, "judge_failed": "unparseable judgment", "judgment": reply}
        item = _verdict(chosen, record.extra["gold"])
        item.update(extracted_by="judge", judgment=reply)
        return item

    async def _judge_labels(self, records: list[Record], items: list[SampleScore]) -> list[SampleScore]:
        """reading judge: the judge names the label of every label reply (a plain label, or a fixed choice no
        option letter or text was read from); an answer that is no label of the set is unreadable."""
        asks = [i for i, x in enumerate(items) if x.get("reading") and x.get("score") is not None]
        sets: list[Any] = [self._plain_set(records[i].reference or "") if "reference_label" in items[i] else self._option_set(records[i].extra["options"])
                for i in asks]
        answers = await asyncio.gather(*(judge_label(self.context.judge, records[i].prediction or "", s.labels)
                                         for i, s in zip(asks, sets)))
        for i, answer in zip(asks, answers):
            if isinstance(answer, str):
                items[i] = {"score": None, "judge_failed": answer}
                continue
            label, rules = answer
            own = {"own_score": items[i]["own_score"]} if "own_score" in items[i] else {}   # the careful verdict stays beside
            if "reference_label" in items[i]:
                items[i] = {**_label_verdict(LabelReading(label, (), rules), items[i]["reference_label"]), **own}
            else:
                options = records[i].extra["options"]
                items[i] = {**_verdict(options.index(label) if label is not None else None, records[i].extra["gold"]), "reading": list(rules),
                            **own}
        return items

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        scored = [x["score"] for x in items if x["score"] is not None]
        details: dict[str, Any] = {"correct": int(sum(scored)), "scored": len(scored)}
        if self.dataset.spec.choices or any("reading" in x for x in items):
            details["reading"] = reading_details(items, self.reading)
        if any("gold" in x for x in items):
            details["unextracted"] = sum(1 for x in items if x.get("unextracted") and x["score"] is not None)
            details["extraction"] = self.dataset.spec.answer_extraction
        failures = Counter(x["judge_failed"].split(":")[0] for x in items if x.get("judge_failed"))
        if failures:
            details["num_judge_failed"] = sum(failures.values())
        value = 100.0 * sum(scored) / len(scored) if scored else None
        if self.dataset.spec.answer_extraction in GUESSING:
            details.update(self._guess_details([x for x in items if x["score"] is not None], value))
        elif self.dataset.spec.answer_extraction in PEER_MATCHES:
            own = [x["own_score"] for x in items if x.get("own_score") is not None]
            step = PEER_MATCHES[self.dataset.spec.answer_extraction][1]
            details["lalmeval"] = side_by_side("lmms-eval", value, 100.0 * sum(own) / len(own) if own else None, step)
        elif self._own_beside:
            details["lalmeval"] = self._own_details([x for x in items if x["score"] is not None], value)
        return value, details

    def _own_details(self, kept: list[SampleScore], value: Optional[float]) -> dict[str, Any]:
        """lalmeval's own accuracy over the same samples (the replies read carefully), beside the peer's."""
        owned = [x["own_score"] for x in kept if x.get("own_score") is not None]
        own = 100.0 * sum(owned) / len(owned) if owned else None
        return side_by_side(str(peer_name(self.dataset)), value, own, reading_step(self.reading))

    def _guess_details(self, kept: list[SampleScore], value: Optional[float]) -> dict[str, Any]:
        """How many replies the peer's parser guessed at, counted at the guess's expected value, and lalmeval's own number."""
        guessed = sum(1 for x in kept if x.get("guessed"))
        own = 100.0 * sum(x["own_score"] for x in kept) / len(kept) if kept else None
        step = ("answer parsing: lmms-eval's parser, a reply it cannot read counted at the expected value of its random "
                "letter (1/k of k options); lalmeval's default extraction, which counts such a reply wrong")
        return {"guessed": guessed, "guessed_counted_as": "1/k each, the expected value of the peer's random letter",
                "correct": int(sum(1 for x in kept if x["score"] == 1.0)),
                "lalmeval": side_by_side("lmms-eval", value, own, step)}


def judge_choice(judgment: str, options: list[str]) -> tuple[bool, Optional[int]]:
    """(readable, option index or None for "none") of the extraction judge's reply.

    The asked-for last line "Answer: X" decides; without it, the reply is read as any model's
    reply is (`default` extraction: "I would say B." is B, never the pronoun); a reply that names
    no single option and does not say "none" is unreadable — a judge failure, not a wrong answer."""
    found = _JUDGE_ANSWER.findall(judgment)
    if found:
        said = found[-1]
        if said.lower() == "none":
            return True, None
        index = LETTERS.index(said.upper())
        return (True, index) if index < len(options) else (False, None)
    chosen = extract_choice("default", _PRONOUN_I.sub("we", judgment), options, labels(len(options)))
    if chosen is not None:
        return True, chosen
    return bool(_JUDGE_NONE.match(judgment.strip())), None


def _states_letter(reply: str, options: list[str]) -> bool:
    """Whether the reply names an option by its letter or its position (not only by its text)."""
    found = mentions(focus(reply), options, labels(len(options)))
    return any(m.kind != "text" and not m.negated for m in found)


_PUNCTUATION = str.maketrans("", "", string.punctuation)


def _exact_text(text: str, strip: bool = True) -> str:
    """A text as lmms-eval's exact_match compares it (ignore_case, ignore_punctuation): lower case, ASCII punctuation
    deleted; its run strips the reply (not the reference) first."""
    return (text.strip() if strip else text).lower().translate(_PUNCTUATION)


def _exact_match(reply: str, reference: str) -> bool:
    """lmms-eval's exact_match with ignore_case and ignore_punctuation (clotho_aqa)."""
    return _exact_text(reply) == _exact_text(reference, strip=False)


def _whole_label(reply: str, reference: str) -> bool:
    """lmms-eval's vggsound match: both texts lower-cased with their whitespace runs made one space, equal, not empty."""
    reply_label, reference_label = (" ".join(t.lower().split()) for t in (reply, reference))
    return bool(reference_label) and reply_label == reference_label


# A peer's rule for a free answer (answer_extraction), and the step that separates it from lalmeval's own reading.
PEER_MATCHES: dict[str, tuple[Callable[[str, str], bool], str]] = {
    "exact_match": (_exact_match, "answer matching: lmms-eval's exact_match (the whole reply equal to the reference, case and "
                                  "ASCII punctuation ignored); lalmeval reads the answer the reply states"),
    "whole_label": (_whole_label, "answer matching: lmms-eval's vggsound match (the whole reply equal to the label, case and "
                                  "spacing ignored); lalmeval reads the answer the reply states"),
}


def _label_verdict(reading: LabelReading, gold: str) -> SampleScore:
    """A plain label reply's score: right when the one label it names is the reference's."""
    item: SampleScore = {"score": 1.0 if reading.label == gold else 0.0, "reference_label": gold, "prediction_label": reading.label}
    if reading.rules:
        item["reading"] = list(reading.rules)
    return item


def _verdict(chosen: Optional[int], gold: int) -> SampleScore:
    if chosen is None:  # no readable answer: wrong, and reported apart
        return {"score": 0.0, "extracted": None, "gold": LETTERS[gold], "unextracted": True}
    return {"score": 1.0 if chosen == gold else 0.0, "extracted": LETTERS[chosen], "gold": LETTERS[gold]}
