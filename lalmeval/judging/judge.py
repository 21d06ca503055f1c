"""The LLM judge: lalmeval's own prompt variants, what a judge is shown, and the cached judge client."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Optional

from lalmeval.config.generation import merge
from lalmeval.config.schema import JudgeProperties
from lalmeval.config.secrets import NO_SECRETS, Redactor
from lalmeval.errors import UserError, closest
from lalmeval.inference.client import Endpoint, Interrupted, RequestFailed
from lalmeval.inference.protocols import PROTOCOLS
from lalmeval.judging.templates import JudgeTemplate, placeholders
from lalmeval.results.cache import InferenceCache, deterministic, request_key
from lalmeval.results.records import Prompt, Record
from lalmeval.results.usage import JUDGE_USAGE, Usage

# What each template variant is filled with; every one of them must appear in the template.
VARIANT_FIELDS = {
    "reference": ("question", "reference", "answer"),
    "reference_transcript": ("question", "reference", "transcript", "answer"),
    "open": ("question", "answer"),
    "open_transcript": ("question", "transcript", "answer"),
}


def check_templates(templates: dict[str, dict[str, dict[str, str]]]) -> None:
    """Refuse a template with a placeholder that cannot be filled, or one that hides a field."""
    for metric, variants in templates.items():
        for variant, by_model in variants.items():
            if variant not in VARIANT_FIELDS:
                raise UserError(f"judge prompt {metric}.{variant}: unknown variant{closest(variant, VARIANT_FIELDS)}; variants are {', '.join(VARIANT_FIELDS)}")
            fields = VARIANT_FIELDS[variant]
            for model, template in by_model.items():
                where = f"judge prompt {metric}.{variant}.{model}"
                try:
                    names = placeholders(template)
                except ValueError as exc:
                    raise UserError(f"{where}: malformed template: {exc}") from None
                for name in names:
                    if name not in fields:
                        raise UserError(f"{where}: placeholder '{{{name}}}' cannot be filled{closest(name, fields)}; available: {', '.join(fields)}")
                for field in fields:
                    if field not in names:
                        raise UserError(f"{where}: the template never shows '{{{field}}}'")


def fields_for(record: Record, stand_ins: bool = True) -> dict[str, str]:
    """What a judge sees of a sample: the instruction, reference, transcript and answer."""
    return judge_fields(record.prompt, record.reference, record.transcript, record.prediction, stand_ins)


def judge_fields(question: str, reference: Optional[str], transcript: Optional[str], answer: Optional[str], stand_ins: bool = True) -> dict[str, str]:
    """The value of every judge template field for one answer (a single-turn one: turn 1, no history).

    With `stand_ins` (lalmeval's own prompts) an empty instruction or answer is shown as a phrase
    saying so; published templates get the texts as they are, as their peers fill them."""
    question, transcript, answer = question.strip(), (transcript or "").strip(), (answer or "").strip()
    if stand_ins:
        if not question:
            question = "(no text instruction: the request was spoken)" if transcript else "(no text instruction)"
        answer = answer or "(empty answer)"
    return {"question": question, "query": transcript or question, "reference": (reference or "").strip(),
            "transcript": transcript, "answer": answer, "turn_number": "1", "history": "", "history_with_references": ""}


def check_prompt_model(props: Optional[JudgeProperties], judge_prompts: dict[str, Any], source: str) -> None:
    """judge_prompt_model_override must name a judge model some judge prompt has a variant for."""
    wanted = props.judge_prompt_model_override if props else None
    if wanted is None:
        return
    known = sorted({model for variants in judge_prompts.values() for by_model in variants.values() for model in by_model} - {"default"})
    if wanted not in known:
        listed = ", ".join(known) if known else "none (a prompts_file's judge_prompts section adds them)"
        raise UserError(f"{source}: judge_properties.judge_prompt_model_override: no judge prompt variant for '{wanted}'"
                        f"{closest(wanted, known)}; known variants: {listed}")


class Judge:
    """One judge endpoint shared by every judge metric, with each judged dataset's template and a judgment cache."""

    def __init__(self, props: JudgeProperties, templates: dict[tuple[str, str], JudgeTemplate], cache: Optional[InferenceCache],
                 redactor: Redactor = NO_SECRETS, cache_sampled: bool = False, stop: Optional[asyncio.Event] = None):
        self.props = props
        self.info = props.as_model()
        self.endpoint = Endpoint(self.info, redactor, stop)   # sends nothing once the run stops
        self._in_flight: set[asyncio.Future] = set()
        self.templates = templates
        self.prompt_model = props.judge_prompt_model_override or props.judge_model
        self.params: dict[str, Any] = {"temperature": props.judge_temperature}
        if props.judge_max_tokens:
            self.params["max_tokens"] = props.judge_max_tokens
        self.cache = cache
        self.cache_sampled = cache_sampled
        self.protocol = PROTOCOLS.get(props.judge_type)
        self.usage = Usage()   # every reply of the run's judge; each score's share goes to JUDGE_USAGE
        self.on_usage: Optional[Callable[[Optional[dict[str, int]]], None]] = None   # the run's budget watch

    def template(self, dataset: str, metric: str) -> JudgeTemplate:
        """The template the plan resolved for this dataset and judge metric."""
        return self.templates[(dataset, metric)]

    def request_params(self, generation: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """What a judge request sends: judge_temperature / judge_max_tokens, under a template's own settings."""
        return merge([self.params, generation or {}])

    async def ask(self, text: str, usable: Callable[[str], bool] = lambda reply: True, system: Optional[str] = None,
                  generation: Optional[dict[str, Any]] = None) -> tuple[str, bool]:
        """The judge's reply to a filled prompt, and whether it came from the cache.

        Only a judgment the caller can use is cached or reused: one cut short or off format is
        asked again by the next run (the printed retry command), not answered from the cache. Like
        model replies, a sampled judgment (temperature > 0) is reused only with cache_sampled."""
        params = self.request_params(generation)
        prompt = Prompt(text=text, system=system, with_audio=False)
        cache = self.cache if self.cache is not None and (deterministic(params) or self.cache_sampled) else None
        key = request_key(self.info, prompt, params, (), "", url=self.endpoint.shown_url) if cache is not None else None
        if key and (cached := cache.get(key)) is not None and usable(cached):
            return cached, True
        body, content_type = self.protocol.body(self.info, prompt, [], params, "")
        text_reply = await self._post(body, content_type)
        if key and usable(text_reply):
            cache.put(key, text_reply)
        return text_reply, False

    async def _post(self, body: bytes, content_type: str) -> str:
        """One judge request, which abandon() can end (Interrupted) without cancelling the metric awaiting it."""
        request = asyncio.ensure_future(self.endpoint.post(self.protocol.path, body, content_type, self.protocol.parse))
        self._in_flight.add(request)
        try:
            await asyncio.wait({request})
        except asyncio.CancelledError:
            request.cancel()
            raise
        finally:
            self._in_flight.discard(request)
        if request.cancelled():
            raise Interrupted()
        answer = request.result().value
        for usage in (self.usage, JUDGE_USAGE.get()):
            if usage is not None:
                usage.add(answer.usage)
        if self.on_usage is not None:
            self.on_usage(answer.usage)
        return answer.text

    def abandon(self) -> None:
        """The grace period after a stop is over: end the judge requests still in flight."""
        for request in self._in_flight:
            request.cancel()


def judge_failure(exc: RequestFailed) -> str:
    """What a failed judge request records: the interruption as it is, anything else as a failed request."""
    return exc.reason if isinstance(exc, Interrupted) else f"judge request failed: {exc.reason}"
