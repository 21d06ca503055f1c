"""BfclPostprocessor: the reply with its reasoning blocks removed and nothing else touched.

A function-call reply is often a ```json fenced block; the general cleaning's removal of wrapping
quotes and backticks would take one backtick off each fence. bfcl_match_score reads the calls itself.
"""

from __future__ import annotations

from lalmeval.postprocess.base import POSTPROCESSORS
from lalmeval.postprocess.general import GeneralPostprocessor, without_thinking


@POSTPROCESSORS.register("BfclPostprocessor")
class BfclPostprocessor(GeneralPostprocessor):
    """Reasoning blocks and surrounding whitespace removed; fences and quotes kept."""

    def process(self, reply: str) -> str:
        return without_thinking(reply).strip()
