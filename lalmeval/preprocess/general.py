"""GeneralPreprocessor: instruction (row or runspec default) + text input + add-ons."""

from __future__ import annotations

from lalmeval.preprocess.base import PREPROCESSORS, Preprocessor
from lalmeval.records import Prompt, Sample


@PREPROCESSORS.register("GeneralPreprocessor")
class GeneralPreprocessor(Preprocessor):
    """The default: audio plus instruction; text modality sends the textual input instead of audio."""

    def prompt(self, sample: Sample) -> Prompt:
        modality = self.dataset.spec.modality
        parts = [sample.instruction or self.dataset.spec.instruction or ""]
        if modality in ("text", "audio_text") and sample.text_input:
            parts.append(sample.text_input)
        parts.extend(self.add_ons)
        text = "\n".join(p.strip() for p in parts if p and p.strip())
        return Prompt(text=text, system=self.system, with_audio=modality != "text")
