"""One batch through the model, whatever the model raises or answers: the code both a thread and a worker process run."""

from __future__ import annotations

import sys
import traceback
from dataclasses import replace
from typing import Any, Sequence, Union

import numpy as np

from lalmeval.serve.errors import ApiError
from lalmeval.serve.loading import reason
from lalmeval.serve.model import AudioModel, Reply, Speech
from lalmeval.serve.replies import ModelBug, checked, one_reply

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
    return [_spoken_checked(model, item, one_reply(model, item, answer)) for item, answer in zip(items, answers)]


def _spoken_checked(model: AudioModel, item: Any, reply: Union[Reply, ApiError]) -> Union[Reply, ApiError]:
    """A chat reply whose request asked to hear it (ChatInput.voice) carries speech the server can encode: else a model bug."""
    if not isinstance(reply, Reply) or (getattr(item, "voice", None) is None and reply.speech is None):
        return reply
    try:
        if reply.speech is None:
            raise ModelBug(f"{type(model).__name__} answered a spoken chat request without speech (a Reply whose speech is None)")
        return replace(reply, speech=_valid(type(model).__name__, reply.speech))
    except ModelBug as exc:
        return exc


def _said(model: AudioModel, items: Sequence[Any]) -> list[Union[Reply, ApiError]]:
    """Speech for a batch of texts: said, not written, so no tokens to count or cut; a malformed answer is that
    request's model bug, and a batch answered with the wrong count is the whole batch's."""
    said = model.speak_batch(items)
    if not isinstance(said, (list, tuple)) or len(said) != len(items):
        raise ModelBug(f"{type(model).__name__} answered a batch of {len(items)} texts to say with {a_count(said)}")
    return [_one_speech(model, item, speech) for item, speech in zip(items, said)]


def _one_speech(model: AudioModel, item: Any, speech: Any) -> Union[Reply, ApiError]:
    """The checked Reply carrying one request's speech, or the ApiError that request gets."""
    owner = type(model).__name__
    try:
        if isinstance(speech, ApiError):
            return one_reply(model, item, speech)   # a refusal: checked like a chat model's
        if isinstance(speech, Reply):
            if speech.speech is None:   # the server would have nothing to send as the audio file
                raise ModelBug(f"{owner} answered a speech request without speech (a Reply whose speech is None)")
            return replace(checked(speech), speech=_valid(owner, speech.speech))
        if not isinstance(speech, Speech):
            raise ModelBug(f"{owner} said {type(speech).__name__}, not Speech")
        return Reply(item.text, 0, speech=_valid(owner, speech))
    except ModelBug as exc:
        return exc


def _valid(owner: str, speech: Any) -> Speech:
    """`speech` when the server can encode it: mono samples, finite, at a positive whole rate; else ModelBug."""
    if not isinstance(speech, Speech):
        raise ModelBug(f"{owner} said {type(speech).__name__}, not Speech")
    samples, rate = np.asarray(speech.samples), speech.rate
    if isinstance(rate, bool) or not isinstance(rate, (int, np.integer)) or rate <= 0:
        raise ModelBug(f"{owner} said speech at rate {rate!r}, not a positive whole number of Hz")
    if samples.ndim != 1 or samples.dtype.kind not in "fi" or not np.isfinite(samples).all():
        raise ModelBug(f"{owner} said speech whose samples are not one finite channel (shape {samples.shape}, {samples.dtype})")
    return speech


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
