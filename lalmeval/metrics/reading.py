"""How a metric reads a reply before scoring it (verbatim, careful, judge), and the count of what reading changed.

The modes are described in docs/reading.md. Under `judge`, the judge's answer is kept only when it
passes the invariant of careful reading: a span of the reply (tags removed), or a label of the set.
Anything else is unreadable: counted, scored as the empty transcript or a wrong label, never scored
as the judge's words.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from lalmeval.inference.client import RequestFailed
from lalmeval.judging.judge import judge_failure
from lalmeval.postprocess.reading import TextReading, read_transcript, without_tags
from lalmeval.results.records import Record
from lalmeval.catalog.runspecs import Dataset

if TYPE_CHECKING:
    from lalmeval.judging.judge import Judge
    from lalmeval.metrics.base import MetricContext

READING_METRICS = frozenset({"word_error_rate", "bleu", "chrf", "accuracy"})  # the metrics that read replies
UNREADABLE = "unreadable"

JUDGE_SPAN = """A model was asked for the {what} of an audio clip. Its reply is below, between the lines.

----------
{reply}
----------

Copy from the reply, character for character, the part that is the {what} itself: leave out any introduction, \
quotes around it, notes, explanations and closing remarks. Do not correct, translate or add anything. If the reply \
holds no {what} (it refuses, or answers something else), answer NONE. Answer with the copied text only."""

JUDGE_LABEL = """A model was asked to classify an audio clip as one of these labels: {labels}.
Its reply is below, between the lines.

----------
{reply}
----------

Which one label does the reply give as its answer? Answer with the label exactly as written in the list, or NONE \
if the reply gives no label or several."""


def reading_mode(dataset: Dataset, context: "MetricContext") -> str:
    """The dataset's reading: its runspec's (or its protocol's), else the config's."""
    return dataset.spec.reading or context.reading


def reading_step(mode: str) -> str:
    """The step that separates a peer protocol's number read under `mode` from lalmeval's careful one."""
    how = "the judge names what is scored" if mode == "judge" else "the protocol scores the reply as written"
    return f"reading: {how}, lalmeval reads it carefully (docs/reading.md)"


def text_fields(reading: TextReading) -> dict[str, Any]:
    """The per-sample fields that say how a transcript was read (nothing when the reply was scored as it is):
    the rules that changed it, and the text scored."""
    if not reading.rules:
        return {}
    return {"reading": list(reading.rules), "read": reading.text, **({"refusal": True} if reading.refusal else {})}


def read_text(reply: str, mode: str, kind: str = "transcript", target: Optional[str] = None) -> TextReading:
    """The text a metric scores of `reply` under `mode` (judge is asked elsewhere: see judge_span); `kind` is
    transcript or translation (into `target`, an ISO code)."""
    return read_transcript(reply, kind, target) if mode == "careful" else TextReading(reply)


async def judge_span(judge: "Judge", reply: str, what: str) -> Union[TextReading, str]:
    """The span of `reply` the judge names as its transcript or translation; a judge failure is its reason (a str)."""
    base, tags = without_tags(reply)
    try:
        said, _ = await judge.ask(JUDGE_SPAN.format(what=what, reply=reply))
    except RequestFailed as exc:
        return judge_failure(exc)
    span = said.strip()
    if span.upper().strip(" .") == "NONE":
        return TextReading("", tuple(tags + ["judge", "refusal"]), refusal=True)
    if span and span in base:
        return TextReading(span, tuple(tags + ["judge"]) if span != base.strip() else tuple(tags))
    return TextReading("", tuple(tags + ["judge", UNREADABLE]))


async def judge_label(judge: "Judge", reply: str, labels: Sequence[str]) -> Union[tuple[Optional[str], tuple[str, ...]], str]:
    """(the label of `labels` the judge names, or None when unreadable; the rules) — or the judge's failure reason."""
    try:
        said, _ = await judge.ask(JUDGE_LABEL.format(labels=", ".join(labels), reply=reply))
    except RequestFailed as exc:
        return judge_failure(exc)
    answer = said.strip().strip("\"'`*").rstrip(".").strip().casefold()
    found = [label for label in labels if label.casefold() == answer]
    return (found[0], ("judge",)) if len(found) == 1 else (None, ("judge", UNREADABLE))


def reading_details(items: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    """details.reading of a score: the mode, how many replies each rule touched, unreadable and refused replies."""
    rules: Counter[str] = Counter()
    for item in items:
        if item.get("score") is not None or item.get("judge_failed"):
            rules.update(item.get("reading") or ())
    out: dict[str, Any] = {"mode": mode, "rules": dict(sorted(rules.items()))}
    out["touched"] = sum(1 for x in items if x.get("reading"))
    out["unreadable"] = rules.get(UNREADABLE, 0)
    out["refusals"] = rules.get("refusal", 0)
    return out


async def judged_texts(metric: Any, records: list[Record], what: str) -> list[dict[str, Any]]:
    """Scores of `records` whose text the judge picked out (metric.score_read scores a reading); a judge failure
    fails its sample, with the reason."""
    readings = await asyncio.gather(*(judge_span(metric.context.judge, r.prediction or "", what) for r in records))
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: [
        {"score": None, "judge_failed": x} if isinstance(x, str) else metric.score_read(r, x) for r, x in zip(records, readings)])
