"""A scripted speech-recognizer stand-in whose mistakes are random: runs of it with different seeds differ
only by noise, and one dataset can be made worse on purpose (an injected regression)."""

from __future__ import annotations

import hashlib
import random
from typing import Optional

from tests.support.endpoint import Reply, Seen, chat_payload
from tests.support.workspace import Workspace

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()


def noisy_datasets(ws: Workspace, names: list[str], samples: int, words: int = 10) -> dict[str, str]:
    """Text datasets `names` (runspec asr/noisy): sample i of dataset d asks 'd i' and expects `words` words.
    Returns each question's reference, for NoisyModel."""
    specs, references = {}, {}
    for name in names:
        rng = random.Random(name)
        rows = [{"id": f"s{i}", "question": f"{name} {i}", "reference": " ".join(rng.choice(WORDS) for _ in range(words))}
                for i in range(samples)]
        references.update({row["question"]: row["reference"] for row in rows})
        specs[name] = {"hf_repo": ws.jsonl(rows, f"data/{name}.jsonl"), "id_column": "id", "modality": "text",
                       "textual_input_column": "question", "audio_column": None}
    ws.runspec("asr", "noisy", specs)
    return references


class NoisyModel:
    """Replies with the reference, each word wrong with the sample's difficulty (plus `worse` on one dataset).

    The difficulty is the sample's own (the same in every run); which words go wrong is drawn from `seed`."""

    def __init__(self, references: dict[str, str], seed: int, worse: Optional[tuple[str, float]] = None, usage: bool = True):
        self.references = references
        self.seed, self.worse, self.usage = seed, worse, usage

    def __call__(self, seen: Seen, n: int) -> Reply:
        question = seen.text.strip()
        dataset = question.split()[0]
        difficulty = int(hashlib.sha256(question.encode()).hexdigest()[:8], 16) / 16**8 * 0.4
        if self.worse and self.worse[0] == dataset:
            difficulty += self.worse[1]
        rng = random.Random(f"{self.seed}:{question}")
        words = [w if rng.random() >= difficulty else rng.choice(WORDS) for w in self.references[question].split()]
        payload = chat_payload(" ".join(words))
        if self.usage:
            prompt, completion = len(question.split()) + 5, len(words)
            payload["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        return Reply(payload=payload)
