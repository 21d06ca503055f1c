"""GeneralPreprocessor: instruction (row, rule or runspec default) + text input + options + add-ons,
with images interleaved where the text places them; a message list is sent as it stands."""

from __future__ import annotations

from typing import Optional

from lalmeval.data.choices import apply, format_prompt, permutation, remap_gold
from lalmeval.data.messages import Audio, Conversation, Text, Turn, has_placeholder, interleave
from lalmeval.preprocess.base import PREPROCESSORS, Preprocessor
from lalmeval.results.records import Prompt, Sample


def _join(*texts: Optional[str], sep: str = "\n") -> str:
    return sep.join(t.strip() for t in texts if t and t.strip())


def framed(template: Optional[str], instruction: Optional[str]) -> Optional[str]:
    """The instruction inside the runspec's prompt_template ('{instruction}' marks its place; without it, it follows)."""
    if not template:
        return instruction
    if "{instruction}" in template:
        return template.replace("{instruction}", instruction or "")
    return _join(template, instruction)


@PREPROCESSORS.register("GeneralPreprocessor")
class GeneralPreprocessor(Preprocessor):
    """The default: the question (and options) with the sample's images and audio."""

    def prompt(self, sample: Sample, repeat: int = 0) -> Prompt:
        spec = self.dataset.spec
        # general_vmcq's audio_k columns are like its image_k ones: a row may have none, and is then text only.
        with_audio = spec.modality != "text" and (bool(sample.audio) or spec.format != "general_vmcq")
        if sample.conversation is not None:
            return self._conversation(sample, with_audio)
        if sample.turns:
            return self._turns(sample, with_audio)
        text_input = sample.text_input if spec.modality in ("text", "audio_text") else None
        question = _join(framed(spec.prompt_template, sample.instruction or self.settings.instruction or spec.instruction), text_input)
        choice = {}
        if sample.choices:
            perm = permutation(self.settings.seed, repeat, sample.id, len(sample.choices)) if self.settings.shuffle else list(range(len(sample.choices)))
            shown = apply(list(sample.choices), perm)
            question = format_prompt(question, shown, self.settings.mc_template)
            gold = remap_gold(sample.gold, perm) if sample.gold is not None else None
            choice = {"options": tuple(shown), "gold": gold, "permutation": tuple(perm)}
        text = _join(question, *self.add_ons)
        audios = len(sample.audio) if with_audio else 0
        # Images, and clips a <audio k> places, stand where the text puts them; otherwise the clips follow the text.
        placed = sample.images or has_placeholder(text)
        conversation = Conversation.user(interleave(text, list(sample.images), audios), self.system) if placed else None
        return Prompt(text=text, system=self.system, with_audio=with_audio, conversation=conversation, **choice)

    def _conversation(self, sample: Sample, with_audio: bool) -> Prompt:
        """A message list (general_vqa) is the prompt: its system message after ours, add-ons on its last turn.

        Its own clips stand where its parts put them and are sent whatever the modality; clips of an
        audio column follow its last turn (with a modality that sends audio)."""
        conv = sample.conversation
        turns = list(conv.turns)
        if self.add_ons:
            last = turns[-1]
            turns[-1] = Turn(last.role, last.parts + (Text(_join(*self.add_ons)),))
        own = len(conv.audio)
        if with_audio and len(sample.audio) > own:  # clips the messages do not place go after the last turn's parts
            last = turns[-1]
            turns[-1] = Turn(last.role, last.parts + tuple(Audio(i) for i in range(own, len(sample.audio))))
        with_audio = with_audio or own > 0
        system = _join(self.system, conv.system, sep="\n\n") or None
        text = _join(*(p.text for t in turns if t.role == "user" for p in t.parts if isinstance(p, Text)))
        return Prompt(text=text, system=system, with_audio=with_audio, conversation=Conversation(system, tuple(turns)))

    def _turns(self, sample: Sample, with_audio: bool) -> Prompt:
        """Multi-turn: the first user turn now, each later one after the reply to the one before.

        With one clip per turn, clip i goes with turn i; otherwise every clip goes with the first."""
        clips = len(sample.audio) if with_audio else 0
        per_turn = clips == len(sample.turns) and clips > 1

        def parts(index: int, text: str) -> tuple:
            audio = [Audio(index)] if per_turn else ([Audio(i) for i in range(clips)] if index == 0 else [])
            return (Text(text), *audio)

        spec = self.dataset.spec
        first = _join(framed(spec.prompt_template, sample.instruction or self.settings.instruction or spec.instruction), sample.turns[0], *self.add_ons)
        followups = tuple(parts(i, turn) for i, turn in enumerate(sample.turns[1:], start=1))
        conversation = Conversation.user(parts(0, first), self.system)
        return Prompt(text="\n\n".join([first, *sample.turns[1:]]), system=self.system, with_audio=with_audio,
                      conversation=conversation, followups=followups)
