"""One batch through the model, whatever the model raises or answers: the code both a thread and a worker process run."""

from __future__ import annotations

import sys
import traceback
from typing import Any, Sequence, Union

from lalmeval.serve.errors import ApiError
from lalmeval.serve.loading import reason
from lalmeval.serve.model import AudioModel, Reply
from lalmeval.serve.replies import ModelBug, one_reply

CHAT, TRANSCRIPTION = "chat", "transcription"


def run_batch(model: AudioModel, kind: str, items: Sequence[Any]) -> list[Union[Reply, ApiError]]:
    """One batch through the model, each answer as a checked Reply, or the ApiError refusing that request alone
    (runs in a worker thread or process, where the model's tokenizer is)."""
    answers = model.generate_batch(items) if kind == CHAT else model.transcribe_batch(items)
    if not isinstance(answers, (list, tuple)):
        raise ModelBug(f"{type(model).__name__} answered a batch with {type(answers).__name__}, not a list")
    if len(answers) != len(items):
        raise ModelBug(f"{type(model).__name__} answered {len(answers)} of a batch of {len(items)}")
    return [one_reply(model, item, answer) for item, answer in zip(items, answers)]


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
