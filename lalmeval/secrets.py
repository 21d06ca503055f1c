"""Secret redaction: every text that reaches a file or the console passes through one Redactor."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable, Sequence
from urllib.parse import quote

if TYPE_CHECKING:
    from lalmeval.config import Config

REDACTED = "<redacted>"

# Shorter values are placeholders, not secrets (vLLM users write `api_key: EMPTY`); replacing them
# inside replies would change predictions. They are still redacted wherever the config is dumped.
MIN_SECRET_LENGTH = 6


def _forms(value: str) -> set[str]:
    """The spellings a secret can take once it is embedded in text: raw, JSON-escaped, repr, URL-quoted."""
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1], quote(value, safe="")}
    # A JSON-encoded reply that itself holds a repr (or the reverse) doubles the backslashes again.
    forms |= {json.dumps(form)[1:-1] for form in list(forms)}
    # PHP, Jackson and many gateways write `/` as `\\/` (valid JSON for the same string).
    forms |= {form.replace("/", "\\/") for form in list(forms)}
    return {f for f in forms if f}


class Redactor:
    """Replaces each secret value, in any of its spellings, by <redacted>."""

    def __init__(self, values: Iterable[str] = (), min_length: int = MIN_SECRET_LENGTH):
        spelled = {form for value in values if value and len(value) >= min_length for form in _forms(value)}
        # Longest first, so an escaped form is replaced before the raw value inside it is.
        self._forms: Sequence[str] = sorted(spelled, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, REDACTED)
        return text

    def bytes(self, data: bytes) -> bytes:
        """The same for raw bytes (a launched server's output)."""
        for form in self._forms:
            encoded = form.encode("utf-8", "replace")
            if encoded in data:
                data = data.replace(encoded, REDACTED.encode())
        return data

    @property
    def longest(self) -> int:
        """Length in bytes of the longest spelling: how much of a stream to hold back between chunks."""
        return max((len(f.encode("utf-8", "replace")) for f in self._forms), default=0)


def clip(text: str, redactor: Redactor, limit: int) -> str:
    """Redact first, then cut to `limit` characters: cutting first could leave a token's prefix behind."""
    text = redactor(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


NO_SECRETS = Redactor()


def scrub(node: Any, redactor: Redactor) -> Any:
    """A copy of JSON-like data with every string (keys included) passed through the redactor."""
    if isinstance(node, dict):
        return {scrub(k, redactor): scrub(v, redactor) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [scrub(v, redactor) for v in node]
    return redactor(node) if isinstance(node, str) else node


def config_secrets(config: "Config") -> list[str]:
    """Every secret value a config holds (model tokens and the judge key)."""
    values = [m.auth_token.get_secret_value() for m in config.models if m.auth_token]
    if config.judge_properties and config.judge_properties.judge_api_key:
        values.append(config.judge_properties.judge_api_key.get_secret_value())
    return [v for v in values if v]


def redacted_config(config: "Config") -> dict:
    """The resolved config as plain data with every secret replaced, wherever it appears (a launch command too)."""
    data = config.model_dump(mode="json")
    for model in data["models"]:
        if model.get("auth_token"):
            model["auth_token"] = REDACTED
    if data.get("judge_properties") and data["judge_properties"].get("judge_api_key"):
        data["judge_properties"]["judge_api_key"] = REDACTED
    # Even a short placeholder is replaced here: the dump is the config, not a model's words.
    return scrub(data, Redactor(config_secrets(config), min_length=1))
