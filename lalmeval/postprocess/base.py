"""The postprocessor interface and its registry."""

from __future__ import annotations

from lalmeval.postprocess.labels import normalize_label
from lalmeval.registry import Registry


class Postprocessor:
    """Cleans raw replies and normalizes labels for exact-match scoring."""

    def process(self, reply: str) -> str:
        """The prediction made from a raw reply."""
        return reply.strip()

    def label(self, text: str, letters: bool) -> str:
        """A comparable form of an answer; `letters` when the reference is an option letter."""
        return normalize_label(text, letters)


POSTPROCESSORS: Registry[type[Postprocessor]] = Registry("postprocessor")
