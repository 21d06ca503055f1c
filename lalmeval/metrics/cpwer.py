"""cpWER: concatenated minimum-permutation word errors, as MeetEval counts them.

Watanabe et al., "CHiME-6 Challenge" (arXiv:2004.09249); the counts follow MeetEval's
`meeteval.wer.cp_word_error_rate` (von Neumann et al., arXiv:2307.11394) exactly: each speaker's
words are one stream; the speaker lists are padded with empty streams to one length; the
assignment of hypothesis to reference streams with the fewest word errors is found by the
Hungarian algorithm (lalmeval.metrics.assignment, which breaks ties as SciPy's `linear_sum_assignment`, so ties
fall the same way); insertions, deletions and substitutions are kaldialign's edit counts of each
assigned pair. tests/test_cpwer.py holds MeetEval 0.4.3's results on generated cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest
from typing import Optional

import kaldialign
import numpy as np

from lalmeval.metrics.assignment import linear_sum_assignment

Streams = dict[str, list[str]]  # speaker → that speaker's words, concatenated in order


@dataclass(frozen=True)
class CpErrors:
    """The counts of one cpWER comparison; `errors / length` is the window's cpWER."""

    errors: int
    length: int
    insertions: int
    deletions: int
    substitutions: int
    missed_speaker: int
    falarm_speaker: int
    assignment: tuple[tuple[Optional[str], Optional[str]], ...]


def _edits(ref: list[str], hyp: list[str]) -> dict[str, int]:
    if not ref:  # kaldialign divides by the reference length for its error rate
        return {"ins": len(hyp), "del": 0, "sub": 0, "total": len(hyp)}
    return kaldialign.edit_distance(ref, hyp)


def cp_word_errors(reference: Streams, hypothesis: Streams) -> CpErrors:
    """Word errors under the best assignment of hypothesis speakers to reference speakers."""
    refs = list(zip_longest(reference, hypothesis))  # (reference speaker or None, ignored) rows
    hyps = list(zip_longest(hypothesis, reference))
    words = lambda streams, name: streams[name] if name is not None else []  # noqa: E731
    cost = np.array([[_edits(words(reference, r), words(hypothesis, h))["total"] for h, _ in hyps] for r, _ in refs], dtype=np.int64)
    rows, cols = linear_sum_assignment(cost) if cost.size else ((), ())
    assignment = tuple((refs[r][0], hyps[c][0]) for r, c in zip(rows, cols))
    counts = {"ins": 0, "del": 0, "sub": 0, "total": 0}
    for r, h in assignment:
        pair = _edits(words(reference, r), words(hypothesis, h))
        for key in counts:
            counts[key] += pair[key]
    return CpErrors(
        errors=counts["total"], length=sum(len(w) for w in reference.values()),
        insertions=counts["ins"], deletions=counts["del"], substitutions=counts["sub"],
        missed_speaker=max(0, len(reference) - len(hypothesis)),
        falarm_speaker=max(0, len(hypothesis) - len(reference)),
        assignment=assignment,
    )
