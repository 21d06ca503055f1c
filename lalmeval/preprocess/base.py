"""The preprocessor interface, the prompt settings it works from, and its registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from lalmeval.catalog.runspecs import Dataset
from lalmeval.registry import Registry
from lalmeval.results.records import Prompt, Sample


@dataclass(frozen=True)
class PromptSettings:
    """What shapes the prompts of one dataset on one model (filters, prompt rules, the run's seed)."""

    system_texts: tuple[str, ...] = ()
    add_on_texts: tuple[str, ...] = ()
    instruction: Optional[str] = None      # a prompt rule's instruction; a row's own instruction still wins
    mc_template: Optional[str] = None      # template text for multiple-choice questions
    shuffle: bool = False                  # permute each sample's options
    seed: int = 0


class Preprocessor:
    """Turns a sample (and its repeat number) into the Prompt to send; subclasses override `prompt`."""

    def __init__(self, dataset: Dataset, settings: PromptSettings = PromptSettings()):
        self.dataset = dataset
        self.settings = settings
        self.system: Optional[str] = "\n\n".join(settings.system_texts) or None
        self.add_ons = list(settings.add_on_texts)

    def prompt(self, sample: Sample, repeat: int = 0) -> Prompt:
        raise NotImplementedError


PREPROCESSORS: Registry[type[Preprocessor]] = Registry("preprocessor")
