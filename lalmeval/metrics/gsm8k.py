"""gsm8k_exact_match: the number a reply puts last in \\boxed{} against the number after GSM8K's '####'.

The convention AU-Harness reports for GSM8K (audio and text): in the reply, the content of the last
\\boxed{...} with commas, dollar signs and backslashes removed and a trailing period dropped, then
its first number; a reply without \\boxed{} is compared as it stands. In the reference, the text
after the last '#### ' marker, cleaned the same way, then its number. Equal strings score 1.
"""

from __future__ import annotations

import re
from typing import Optional

from lalmeval.metrics.base import METRICS, SampleScore
from lalmeval.metrics.percent import PercentCorrect
from lalmeval.results.records import Record

_BOXED = re.compile(r"\\boxed\{([^}]+)\}")
_CLEAN = re.compile(r"[,$\\]")
_NUMBER = re.compile(r"-?[0-9.]+")
_MARKED = re.compile(r"#### (-?[0-9.]+)")


def _clean(text: str) -> str:
    return re.sub(r"\.$", "", _CLEAN.sub("", text))


def reply_answer(reply: str) -> str:
    """The last boxed number of a reply (the reply itself when nothing is boxed)."""
    # Every box closes at a "}", so none starts after the last one: searching only up to it finds the same boxes,
    # and an unclosed "\boxed{" repeated over a looping reply is no longer scanned to the end from each.
    boxed = _BOXED.findall(reply, 0, reply.rfind("}") + 1)
    if not boxed:
        return reply
    cleaned = _clean(boxed[-1])
    number = _NUMBER.search(cleaned)
    return number.group(0) if number else cleaned.strip()


def reference_answer(reference: str) -> str:
    """The number after the last '#### ' of a GSM8K solution (the cleaned text when there is none)."""
    cleaned = _clean(reference)
    tail = cleaned[cleaned.rfind("#### "):] if "#### " in cleaned else cleaned
    marked = _MARKED.search(tail)
    return marked.group(1) if marked else tail.strip()


@METRICS.register("gsm8k_exact_match")
class Gsm8kExactMatch(PercentCorrect):
    """Percentage of replies whose boxed number equals the reference's '####' number."""

    name = "gsm8k_exact_match"
    display_fields = frozenset({"extracted", "expected"})

    def score_record(self, record: Record) -> SampleScore:
        reference: Optional[str] = record.reference
        if not reference or not reference.strip():
            return {"score": None, "reason": "empty reference"}
        got, expected = reply_answer(record.prediction or ""), reference_answer(reference)
        return {"score": 1.0 if got == expected else 0.0, "extracted": got, "expected": expected}
