"""Generation settings (temperature, top_p, seed, stop, penalties, extra_body) and their precedence.

Settings come in layers, and for each setting the most specific layer that gives it wins:

    the model entry  <  overrides naming only the model  <  the runspec's generation_kwargs
    <  overrides naming only a task (category < task type < dataset)  <  overrides naming both

`extra_body` (vLLM's sampling extras and anything else the server takes) is merged key by key in
the same order and sent at the top level of the request body.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lalmeval.config.numbers import NoBooleanNumbers

# Request fields that generation settings may not replace through extra_body.
RESERVED = frozenset({"model", "messages", "stream", "n"})


class Generation(NoBooleanNumbers):
    """Sampling settings of a request; unset ones are not sent (the server's defaults apply)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    temperature: Optional[float] = Field(None, ge=0, le=2.0, description="Sampling temperature (0-2).")
    top_p: Optional[float] = Field(None, gt=0, le=1.0, description="Nucleus sampling mass (0-1].")
    top_k: Optional[int] = Field(None, ge=-1, le=1_000_000, description="Top-k sampling (vLLM; -1 turns it off).")
    min_p: Optional[float] = Field(None, ge=0, le=1.0, description="Minimum token probability relative to the most likely (vLLM).")
    seed: Optional[int] = Field(None, ge=0, le=2**63 - 1, description="Sampling seed; a seeded request is deterministic and may be cached.")
    max_tokens: Optional[int] = Field(None, gt=0, le=10_000_000, description="Longest reply, in tokens.")
    stop: Optional[Union[str, list[str]]] = Field(None, description="Stop sequence(s).")
    presence_penalty: Optional[float] = Field(None, ge=-2.0, le=2.0, description="OpenAI presence penalty (-2 to 2).")
    frequency_penalty: Optional[float] = Field(None, ge=-2.0, le=2.0, description="OpenAI frequency penalty (-2 to 2).")
    repetition_penalty: Optional[float] = Field(None, gt=0, le=10.0, description="vLLM repetition penalty (1 = none).")
    extra_body: Optional[dict[str, Any]] = Field(None, description="Extra top-level request fields (e.g. vLLM's skip_special_tokens), merged key by key.")

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: Optional[Union[str, list[str]]]) -> Optional[Union[str, list[str]]]:
        if isinstance(value, list) and not (0 < len(value) <= 16 and all(isinstance(v, str) and v for v in value)):
            raise ValueError("stop must be a string or a list of 1 to 16 non-empty strings")
        return value

    @field_validator("extra_body")
    @classmethod
    def _extras(cls, value: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        clash = sorted(set(value or {}) & RESERVED)
        if clash:
            raise ValueError(f"extra_body may not set {', '.join(clash)} (lalmeval builds them)")
        try:
            return None if value is None else as_json(value)
        except RecursionError:
            raise ValueError("nested too deeply") from None

    def given(self) -> dict[str, Any]:
        """The settings this layer gives (unset ones left out)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


def as_json(value: Any, where: str = "") -> Any:
    """`value` as a request body can carry it — a ValueError naming the key that cannot be sent.

    YAML reads `2024-01-01` as a date and `.nan` as a float a JSON body cannot hold; such a value
    would fail every request of the run, so it is refused where it is written. Integer keys
    (`logit_bias: {50256: -100}`) become the strings JSON would send."""
    if isinstance(value, dict):
        out = {}
        for key, inner in value.items():
            if isinstance(key, int) and not isinstance(key, bool):
                key = str(key)
            if not isinstance(key, str):
                raise ValueError(f"key {key!r} under '{where or '.'}' is a {type(key).__name__}, not text; quote it")
            out[key] = as_json(inner, f"{where}.{key}" if where else key)
        return out
    if isinstance(value, (list, tuple)):
        return [as_json(inner, f"{where}[{i}]") for i, inner in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"'{where}': {value} is not a finite number, which JSON cannot carry")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    shown = str(value) if len(str(value)) <= 60 else str(value)[:57] + "..."
    raise ValueError(f"'{where}': {shown} is a {type(value).__name__}, not a JSON value; quote it to send it as text")


def merge(layers: list[dict[str, Any]]) -> dict[str, Any]:
    """Settings from layers ordered least to most specific: later layers win; extra_body merges by key."""
    params: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for layer in layers:
        extra.update(layer.get("extra_body") or {})
        params.update({k: v for k, v in layer.items() if k != "extra_body"})
    if extra:
        params["extra_body"] = extra
    return params


def request_fields(params: dict[str, Any]) -> dict[str, Any]:
    """The settings as request body fields: extra_body's keys at the top level."""
    fields = {k: v for k, v in params.items() if k != "extra_body"}
    fields.update(params.get("extra_body") or {})
    return fields
