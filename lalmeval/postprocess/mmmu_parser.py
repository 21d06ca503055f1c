"""lmms-eval's MMMU-style multiple-choice parsers (mmar, muchomusic), which guess a random letter when they read none.

Registered as answer extractions `mmmu` (lmms_eval/tasks/mmar/utils.py parse_multi_choice_response) and
`mmmu_letters` (lmms_eval/tasks/muchomusic/utils.py; air_bench's foundation tasks, v0.3.0 too, and mmau parse the
same way: its run strips every reply before the task sees it), github.com/EvolvingLMMs-Lab/lmms-eval @ 75571cfe:

1. The reply loses the characters , . ! ? ; : ' at both ends and is framed by spaces.
2. Candidates, the first rule that finds any deciding: every letter written "(X)"; else every letter
   followed by a space (`mmmu`: "X ", anywhere, even ending a word; `mmmu_letters`: " X "); else
   every "X."; else (`mmmu` only, a reply of more than five words) every option whose text the
   reply holds, in any case.
3. One candidate is the answer; of several, the one written last ("(X)", " X " or the option's
   text, as the rule that found them); none: the peer guesses a letter at random. Here that reply
   is left unread (None), and accuracy counts it at the guess's expected value, 1/k of k options.
"""

from __future__ import annotations

import re
from typing import Optional

from lalmeval.postprocess.extraction import EXTRACTORS

GUESSING = frozenset({"mmmu", "mmmu_letters"})  # extractions whose unread replies the peer scores as a random letter
_ENDS = ",.!?;:'"


def _option_text(option: str, label: str) -> str:
    """The option's text without a leading "X." / "X)" / "X:" (the peer's choices carry their letter)."""
    return option[2:].strip() if re.match(rf"^{re.escape(label)}[.):]", option, re.IGNORECASE) else option


def _candidates(response: str, labels: list[str], options: list[str], with_text: bool) -> tuple[list[str], str]:
    """The letters the first matching rule finds, and which rule found them."""
    found = [x for x in labels if f"({x})" in response]
    if found:
        return found, "brackets"
    found = [x for x in labels if (f"{x} " if with_text else f" {x} ") in response]
    if found:
        return found, "letter"
    found = [x for x in labels if f"{x}." in response]
    if found:
        return found, "letter"
    if with_text and len(response.split()) > 5:
        texts = {x: _option_text(o, x) for x, o in zip(labels, options)}
        return [x for x in labels if texts[x].lower() in response.lower()], "text"
    return [], "letter"


def _last_written(response: str, found: list[str], rule: str, labels: list[str], options: list[str], with_text: bool) -> str:
    """Of several candidates, the one written last (the first of equals, as numpy's argmax picks it)."""
    if rule == "text":
        texts = {x: _option_text(o, x).lower() for x, o in zip(labels, options)}
        positions = [response.lower().rfind(texts[x]) for x in found]
    elif rule == "brackets" and with_text:
        positions = [response.rfind(f"({x})") for x in found]
    else:
        positions = [response.rfind(f" {x} ") for x in found]
    return found[positions.index(max(positions))]


def _parse(reply: str, options: list[str], labels: list[str], with_text: bool) -> Optional[int]:
    response = f" {reply.strip(_ENDS)} "
    found, rule = _candidates(response, labels, options, with_text)
    if not found:
        return None  # the peer's random letter: scored at its expected value by accuracy
    chosen = found[0] if len(found) == 1 else _last_written(response, found, rule, labels, options, with_text)
    return labels.index(chosen)


@EXTRACTORS.register("mmmu")
def mmmu(reply: str, options: list[str], labels: list[str], pattern: Optional[str] = None) -> Optional[int]:
    """lmms-eval's mmar parser: brackets, letters, then option texts; None where it would guess. The reply is stripped
    first, as lmms-eval's run strips every generated reply before a task reads it."""
    return _parse((reply or "").strip(), options, [x.upper() for x in labels], with_text=True)


@EXTRACTORS.register("mmmu_letters")
def mmmu_letters(reply: str, options: list[str], labels: list[str], pattern: Optional[str] = None) -> Optional[int]:
    """lmms-eval's muchomusic parser: brackets and letters only; None where it would guess."""
    return _parse((reply or "").strip(), options, [x.upper() for x in labels], with_text=False)

