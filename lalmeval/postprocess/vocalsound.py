"""lmms-eval's VocalSound answer reading (lmms_eval/tasks/vocalsound/utils.py get_answer, v0.3.0 and 75571cfe alike).

Registered as answer extraction `vocalsound`: the first of Laughter, Sniff, Throat, Cough, Sigh, Sneeze (in
that order) whose name the reply holds anywhere, in any case, is the answer ("Throat" is the option
"Throat clearing"); a reply holding none of them chooses nothing and is scored wrong, as there. Substrings
count as the peer counts them: "sighted" holds "sigh".
"""

from __future__ import annotations

from typing import Optional

from lalmeval.postprocess.extraction import EXTRACTORS

SEARCH_ORDER = ("Laughter", "Sniff", "Throat", "Cough", "Sigh", "Sneeze")


@EXTRACTORS.register("vocalsound")
def vocalsound(reply: str, options: list[str], labels: list[str], pattern: Optional[str] = None) -> Optional[int]:
    """The option of the first class name the reply holds, in the peer's search order; None when it holds none."""
    lowered = (reply or "").lower()
    found = next((name for name in SEARCH_ORDER if name.lower() in lowered), None)
    if found is None:
        return None
    wanted = "throat clearing" if found == "Throat" else found.lower()
    return next((i for i, option in enumerate(options) if option.strip().lower() == wanted), None)
