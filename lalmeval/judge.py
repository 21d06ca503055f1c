"""The LLM judge: prompt templates, filling, the cached judge client and rating parsing."""

from __future__ import annotations

import asyncio
import json
import re
import string
from typing import Any, Callable, Optional

from lalmeval.cache import InferenceCache, deterministic, request_key
from lalmeval.config import JudgeProperties
from lalmeval.errors import UserError, closest
from lalmeval.inference.client import Endpoint, Interrupted, RequestFailed
from lalmeval.inference.protocols import PROTOCOLS
from lalmeval.records import Prompt, Record
from lalmeval.secrets import NO_SECRETS, Redactor

# What each template variant is filled with; every one of them must appear in the template.
VARIANT_FIELDS = {
    "reference": ("question", "reference", "answer"),
    "reference_transcript": ("question", "reference", "transcript", "answer"),
    "open": ("question", "answer"),
    "open_transcript": ("question", "transcript", "answer"),
}


def placeholders(template: str) -> list[str]:
    """The {names} a template asks for, in order."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


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


_RATING = re.compile(r"rating\W{0,6}\[{0,2}\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_JSON = re.compile(r"\{[^{}]*\}")


def parse_rating(text: str) -> Optional[float]:
    """The rating of a judgment: a JSON object's score/rating, else the last 'Rating: N'."""
    for blob in reversed(_JSON.findall(text)):
        try:
            data = json.loads(blob)
        except ValueError:
            continue
        for key in ("score", "rating"):
            if isinstance(data, dict) and isinstance(data.get(key), (int, float)) and not isinstance(data.get(key), bool):
                return float(data[key])
    matches = _RATING.findall(text)
    return float(matches[-1]) if matches else None


def fields_for(record: Record) -> dict[str, str]:
    """What a judge sees of a sample: the instruction, reference, transcript and answer."""
    question = record.prompt.strip()
    if not question:
        question = "(no text instruction: the request was spoken)" if record.transcript else "(no text instruction)"
    return {
        "question": question,
        "reference": (record.reference or "").strip(),
        "transcript": (record.transcript or "").strip(),
        "answer": (record.prediction or "").strip() or "(empty answer)",
    }


class Judge:
    """One judge endpoint shared by every judge metric, with its prompts and a judgment cache."""

    def __init__(self, props: JudgeProperties, templates: dict[str, Any], cache: Optional[InferenceCache], redactor: Redactor = NO_SECRETS,
                 cache_sampled: bool = False, stop: Optional[asyncio.Event] = None):
        self.props = props
        self.info = props.as_model()
        self.endpoint = Endpoint(self.info, redactor, stop)   # sends nothing once the run stops
        self._in_flight: set[asyncio.Future] = set()
        self.templates = templates
        self.prompt_model = props.judge_prompt_model_override or props.judge_model
        self.params: dict[str, Any] = {"temperature": props.judge_temperature}
        if props.judge_max_tokens:
            self.params["max_tokens"] = props.judge_max_tokens
        # Like model replies, a sampled judgment (judge_temperature > 0) is reused only with cache_sampled.
        self.cache = cache if deterministic(self.params) or cache_sampled else None
        self.protocol = PROTOCOLS.get(props.judge_type)

    def template(self, metric: str, variant: str) -> Optional[str]:
        """The template for this metric and variant: the prompt model's own, else the default."""
        by_model = self.templates.get(metric, {}).get(variant, {})
        return by_model.get(self.prompt_model, by_model.get("default"))

    async def ask(self, text: str, usable: Callable[[str], bool] = lambda reply: True) -> tuple[str, bool]:
        """The judge's reply to a filled prompt, and whether it came from the cache.

        Only a judgment the caller can use is cached or reused: one cut short or off format is
        asked again by the next run (the printed retry command), not answered from the cache."""
        prompt = Prompt(text=text, with_audio=False)
        key = request_key(self.info, prompt, self.params, (), "", url=self.endpoint.shown_url) if self.cache is not None else None
        if key and (cached := self.cache.get(key)) is not None and usable(cached):
            return cached, True
        body, content_type = self.protocol.body(self.info, prompt, [], self.params, "")
        text_reply = await self._post(body, content_type)
        if key and usable(text_reply):
            self.cache.put(key, text_reply)
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
        return request.result().value.text

    def abandon(self) -> None:
        """The grace period after a stop is over: end the judge requests still in flight."""
        for request in self._in_flight:
            request.cancel()


def judge_failure(exc: RequestFailed) -> str:
    """What a failed judge request records: the interruption as it is, anything else as a failed request."""
    return exc.reason if isinstance(exc, Interrupted) else f"judge request failed: {exc.reason}"
