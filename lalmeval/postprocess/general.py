"""GeneralPostprocessor: strips reasoning blocks, wrapping quotes and whitespace."""

from __future__ import annotations

import re

from lalmeval.postprocess.base import POSTPROCESSORS, Postprocessor

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"^.*?</think>", re.DOTALL | re.IGNORECASE)


@POSTPROCESSORS.register("GeneralPostprocessor")
class GeneralPostprocessor(Postprocessor):
    """The default cleaning, safe for every task."""

    def process(self, reply: str) -> str:
        text = _THINK.sub("", reply)
        if "</think>" in text.lower():  # a reply whose opening tag was in the prompt template
            text = _OPEN_THINK.sub("", text)
        text = text.strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
            text = text[1:-1].strip()
        return text
