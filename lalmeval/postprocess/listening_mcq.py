"""lmms-eval's answer reading for its listening-comprehension MCQ tasks (cn_college_listen_mcq, dream_tts_mcq).

Registered as answer extraction `listening_mcq` (lmms_eval/tasks/cn_college_listen_mcq/utils.py and
dream_tts_mcq/utils.py, extract_answer, github.com/EvolvingLMMs-Lab/lmms-eval @ 75571cfe): the reply, lower-cased and
stripped, is searched for the first of these statements, in this order: "answer is X", "answer: X", "choose X",
"option X", "(X)", a reply opening "X." / "X," / "X。", a reply that is only "X"; failing all, a reply that merely
starts with a, b, c or d picks that letter ("a violin" is A, as there). Letters are A-D whatever the number of
options; a letter beyond the options, or no letter, is wrong, as there.
"""

from __future__ import annotations

import re
from typing import Optional

from lalmeval.postprocess.extraction import EXTRACTORS

# The peer's patterns, searched in order over the lower-cased reply (its "the answer is" and "correct answer is"
# patterns are found by "answer is" first, so they never decide and are left out).
_STATEMENTS = [re.compile(p) for p in (r"answer\s+is\s+([abcd])", r"answer:\s*([abcd])", r"choose\s+([abcd])", r"option\s+([abcd])",
                                       r"\(([abcd])\)", r"^([abcd])[\.,。]", r"^([abcd])$")]


def listening_letter(reply: str) -> Optional[str]:
    """The letter A-D the peer reads from a reply, or None."""
    text = (reply or "").lower().strip()
    if not text:
        return None
    for statement in _STATEMENTS:
        found = statement.search(text)
        if found:
            return found.group(1).upper()
    return text[0].upper() if text[0] in "abcd" else None


@EXTRACTORS.register("listening_mcq")
def listening_mcq(reply: str, options: list[str], labels: list[str], pattern: Optional[str] = None) -> Optional[int]:
    """The option of the letter lmms-eval's listening MCQ tasks read; None when it reads none or one beyond the options."""
    letter = listening_letter(reply)
    index = "ABCD".index(letter) if letter else None
    return index if index is not None and index < len(options) else None
