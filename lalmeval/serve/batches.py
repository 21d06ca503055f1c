"""One batch through the model, whatever the model raises or answers: the code both a thread and a worker process run."""

from __future__ import annotations

import sys
import traceback
from typing import Any, Sequence, Union

from lalmeval.serve.errors import ApiError
from lalmeval.serve.loading import reason
from lalmeval.serve.model import AudioModel, Reply, Speech
from lalmeval.serve.replies import ModelBug, one_reply

CHAT, TRANSCRIPTION, SPEECH = "chat", "transcription", "speech"


def run_batch(model: AudioModel, kind: str, items: Sequence[Any]) -> list[Union[Reply, ApiError]]:
    """One batch through the model, each answer as a checked Reply, or the ApiError refusing that request alone
    (runs in a worker thread or process, where the model's tokenizer is)."""
    if kind == SPEECH:
        return _said(model, items)
    answers = model.generate_batch(items) if kind == CHAT else model.transcribe_batch(items)
    if not isinstance(answers, (list, tuple)):
        raise ModelBug(f"{type(model).__name__} answered a batch with {type(answers).__name__}, not a list")
    if len(answers) != len(items):
        raise ModelBug(f"{type(model).__name__} answered {len(answers)} of a batch of {len(items)}")
    return [one_reply(model, item, answer) for item, answer in zip(items, answers)]


def _said(model: AudioModel, items: Sequence[Any]) -> list[Union[Reply, ApiError]]:
    """Speech for a batch of texts: said, not written, so no tokens to count or cut; anything else is a model bug."""
    said = model.speak_batch(items)
    if not isinstance(said, (list, tuple)) or len(said) != len(items):
        raise ModelBug(f"{type(model).__name__} answered a batch of {len(items)} texts to say with {a_count(said)}")
    replies: list[Union[Reply, ApiError]] = []
    for item, speech in zip(items, said):
        if isinstance(speech, Speech):
            replies.append(Reply(item.text, 0, speech=speech))
        elif isinstance(speech, (Reply, ApiError)):
            replies.append(speech)
        else:
            raise ModelBug(f"{type(model).__name__} said {type(speech).__name__}, not Speech")
    return replies


def a_count(value: Any) -> str:
    return f"{len(value)} answers" if isinstance(value, (list, tuple)) else type(value).__name__


def guarded_batch(model: AudioModel, kind: str, items: Sequence[Any]) -> Union[list[Union[Reply, ApiError]], ApiError]:
    """run_batch, where anything the model raises (SystemExit and KeyboardInterrupt too) is the batch's 500, and
    its traceback goes to the server's log: a model's exception ends requests, never the server or a worker."""
    try:
        return run_batch(model, kind, items)
    except ApiError as exc:
        return exc
    except BaseException as exc:  # noqa: BLE001 - a real Ctrl-C never lands here: it reaches the main thread, and workers ignore it
        traceback.print_exc(file=sys.stderr)
        return ApiError(500, f"internal error: {reason(exc)}")
