"""Secret redaction: every text that reaches a file or the console passes through one Redactor."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence
from urllib.parse import quote

from lalmeval.errors import UserError

if TYPE_CHECKING:
    from lalmeval.config import Config

REDACTED = "<redacted>"

# Shorter values cannot be told apart from ordinary text (vLLM users write `auth_token: EMPTY`, a
# throwaway token may be `x`): replacing them inside replies, model ids or URLs would change what is
# recorded and compared. They are blanked where they are the secret (their own field), nowhere else.
MIN_SECRET_LENGTH = 6


def _forms(value: str) -> set[str]:
    """The spellings a secret can take once it is embedded in text: raw, JSON-escaped, repr, URL-quoted."""
    forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1], quote(value, safe="")}
    # A JSON-encoded reply that itself holds a repr (or the reverse) doubles the backslashes again.
    forms |= {json.dumps(form)[1:-1] for form in list(forms)}
    # PHP, Jackson and many gateways write `/` as `\/` (valid JSON for the same string).
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


@contextmanager
def redacted_errors(redactor: Redactor) -> Iterator[None]:
    """User errors raised inside are scrubbed: they name URLs, commands and settings, which may hold a secret."""
    try:
        yield
    except UserError as exc:
        text = redactor(str(exc))
        if text == str(exc):
            raise
        raise UserError(text) from None  # not chained: a traceback (--debug) would show the original


def is_credential(name: str) -> bool:
    """Whether a request field's name says it carries a credential: api_key, access_token, password, ..."""
    words = re.split(r"[^a-z0-9]+", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower())
    joined = "".join(words)
    return bool({"token", "bearer"} & set(words)) or any(w in joined for w in ("apikey", "accesskey", "secret", "passw", "authoriz", "credential"))


def _credentials(node: Any, where: str) -> Iterator[tuple[str, str]]:
    """(where, value) of every string under a credential-named key, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and is_credential(str(key)):
                yield f"{where}.{key}", value
            else:
                yield from _credentials(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _credentials(value, f"{where}[{index}]")


def blank_credentials(node: Any) -> Any:
    """A copy with every string under a credential-named key replaced by <redacted>, whatever its length."""
    if isinstance(node, dict):
        return {k: REDACTED if isinstance(v, str) and is_credential(str(k)) else blank_credentials(v) for k, v in node.items()}
    if isinstance(node, list):
        return [blank_credentials(v) for v in node]
    return node


def _secret_fields(config: "Config") -> list[tuple[str, str]]:
    """(where, value) of every secret a config holds: model tokens, the judge key, credentials in extra_body."""
    found = [(f"models[{m.name}].auth_token", m.auth_token.get_secret_value()) for m in config.models if m.auth_token]
    if config.judge_properties and config.judge_properties.judge_api_key:
        found.append(("judge_properties.judge_api_key", config.judge_properties.judge_api_key.get_secret_value()))
    for m in config.models:
        found += _credentials(m.generation_kwargs.extra_body, f"models[{m.name}].generation_kwargs.extra_body")
    for index, override in enumerate(config.generation_overrides):
        found += _credentials(override.extra_body, f"generation_overrides[{index}].extra_body")
    return [(where, value) for where, value in found if value]


def raw_secrets(raw: Any) -> list[str]:
    """The secrets of a config not yet validated (its credential-named fields), to scrub its errors."""
    return [value for _, value in _credentials(raw, "")]


def config_secrets(config: "Config") -> list[str]:
    """Every secret value a config holds (model tokens, the judge key, credential fields of extra_body)."""
    return [value for _, value in _secret_fields(config)]


def redacted_params(params: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """Generation parameters as recorded and keyed: credentials blanked, secrets scrubbed from the rest."""
    if params.get("extra_body"):
        params = {**params, "extra_body": blank_credentials(params["extra_body"])}
    return scrub(params, redactor)


def redacted_config(config: "Config") -> dict:
    """The resolved config as plain data: secret fields blanked, and secrets long enough to tell apart from
    ordinary text replaced wherever else they appear (a launch command, a URL)."""
    data = config.model_dump(mode="json")
    for model in data["models"]:
        if model.get("auth_token"):
            model["auth_token"] = REDACTED
        model["generation_kwargs"] = blank_credentials(model["generation_kwargs"])
    data["generation_overrides"] = blank_credentials(data["generation_overrides"])
    if data.get("judge_properties") and data["judge_properties"].get("judge_api_key"):
        data["judge_properties"]["judge_api_key"] = REDACTED
    return scrub(data, Redactor(config_secrets(config)))


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node


def short_secret_warnings(config: "Config") -> list[str]:
    """One line per secret too short to scrub that the config repeats elsewhere: there it is written as is."""
    dumped = [text.replace(REDACTED, "") for text in _strings(redacted_config(config))]
    return [f"warning: {where} is shorter than {MIN_SECRET_LENGTH} characters, so it is not scrubbed from other text "
            f"and is written as is where the config repeats it (and in any reply that does); fine for a placeholder "
            f"such as EMPTY, not for a real secret"
            for where, value in _secret_fields(config) if len(value) < MIN_SECRET_LENGTH and any(value in text for text in dumped)]
