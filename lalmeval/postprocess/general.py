"""GeneralPostprocessor: strips reasoning blocks, wrapping quotes and whitespace."""

from __future__ import annotations

import re

from lalmeval.postprocess.base import POSTPROCESSORS, Postprocessor

_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)


def without_thinking(reply: str) -> str:
    """`reply` without its <think>…</think> blocks, and without everything up to a </think> left over
    (a reply whose opening tag was in the prompt template). One pass over the tags: a regex such as
    `<think>.*?</think>` would rescan the rest of the reply from every unclosed <think>."""
    kept, start, opened = [], 0, None
    for tag in _TAG.finditer(reply):
        if tag.group(1) and opened is not None:  # closes the block opened at `opened`
            kept.append(reply[start:opened])
            start, opened = tag.end(), None
        elif not tag.group(1) and opened is None:
            opened = tag.start()
    kept.append(reply[start:])
    text = "".join(kept)
    close = _TAG.search(text)  # a </think> left over (an unclosed <think> is kept, as it always was)
    while close is not None and not close.group(1):
        close = _TAG.search(text, close.end())
    return text[close.end():] if close is not None else text


@POSTPROCESSORS.register("GeneralPostprocessor")
class GeneralPostprocessor(Postprocessor):
    """The default cleaning, safe for every task."""

    def process(self, reply: str) -> str:
        text = without_thinking(reply)
        text = text.strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
            text = text[1:-1].strip()
        return text
