"""The preprocessor interface and its registry."""

from __future__ import annotations

from typing import Optional

from lalmeval.records import Prompt, Sample
from lalmeval.registry import Registry
from lalmeval.runspecs import Dataset


class Preprocessor:
    """Turns a sample into the prompt text and system message; subclasses override `prompt`."""

    def __init__(self, dataset: Dataset, system_texts: list[str], add_on_texts: list[str]):
        self.dataset = dataset
        self.system: Optional[str] = "\n\n".join(system_texts) or None
        self.add_ons = add_on_texts

    def prompt(self, sample: Sample) -> Prompt:
        raise NotImplementedError


PREPROCESSORS: Registry[type[Preprocessor]] = Registry("preprocessor")
