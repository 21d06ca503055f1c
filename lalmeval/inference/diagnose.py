"""What a refusal most likely means, in words a user can act on: shared by fail-fast and `lalmeval check`."""

from __future__ import annotations

import re
from typing import Optional
from urllib.parse import urlsplit

from lalmeval.config.schema import ModelInfo

# Answers that no retry can change and that say the endpoint (key, URL, model id), not one sample, is wrong:
# 405 (the url is a web page or another API, which takes no POST there), 407 (a gateway's own credentials)
# and 410 (a retired model) included.
REFUSALS = frozenset({401, 403, 404, 405, 407, 410, 422})
# A 400 is about its request, and usually about that request alone (Azure's content filter answers one
# prompt with it). The same 400 message for every one of an endpoint's first requests is about the endpoint
# (o1 refusing max_tokens, a text-only model sent audio), unless the message is a per-prompt policy verdict.
_PER_PROMPT = re.compile(r"content[ _-]?(?:filter|management|policy)|safety|moderat|policy|harm|flagged", re.IGNORECASE)


def refuses_every_request(status: Optional[int], message: str) -> bool:
    """Whether a 400 with this message, repeated for every first request, says the endpoint refuses them all."""
    return status == 400 and bool(message.strip()) and not _PER_PROMPT.search(message)


_VERSIONED = re.compile(r"/v\d+[a-z0-9.]*/?$")   # .../v1, .../v1beta: an OpenAI-style API base


def likely_fix(status: Optional[int], base_url: str, info: ModelInfo) -> str:
    """The most likely fix for a request to `base_url` (as it may be shown: no secret) refused with `status`."""
    if status in (401, 403):
        header = "an api-key header (api_version is set)" if info.api_version else "Authorization: Bearer"
        return f"check auth_token: the server refused the key sent as {header} (wrong, missing or expired, or not allowed this model)"
    if status == 404:
        if not _VERSIONED.search(urlsplit(base_url).path or "/"):
            return "the url probably misses /v1 (set it to the API base, e.g. http://host:port/v1)"
        return f"the model id '{info.model}' is probably not served there (or the server has no such route)"
    if status == 405:
        return "the url does not point at an OpenAI-compatible API (the server takes no POST there): set it to the API base, e.g. http://host:port/v1"
    if status == 407:
        return "a proxy in front of the server asks for its own credentials, which lalmeval does not send: set url to the server itself"
    if status == 410:
        return f"the model id '{info.model}' is no longer served there (retired): use its successor's id"
    if status == 400:
        return ("the server refuses every request the same way: its message names what it does not take (a generation setting "
                f"such as max_tokens, an audio part for a text-only model): check model '{info.model}', generation settings "
                f"and inference_type '{info.inference_type}'")
    if status == 422:
        return f"the server could not use the request: check model '{info.model}', inference_type '{info.inference_type}' and audio_format '{info.audio_format}'"
    return "check url, model and auth_token"


def refusal_line(status: Optional[int], message: str, base_url: str, path: str, info: ModelInfo) -> str:
    """'HTTP 404 from http://h:1/chat/completions (Not Found): the url probably misses /v1 (…)' — status, URL, fix."""
    return f"HTTP {status} from POST {base_url.rstrip('/')}{path} ({message}): {likely_fix(status, base_url, info)}"


def fix_for(reason: str, base_url: str, info: ModelInfo) -> str:
    """The likely fix for a failed request, from its recorded reason ('' when there is nothing to add)."""
    status = re.match(r"HTTP (\d{3})", reason)
    if status:
        code = int(status.group(1))
        if code >= 500:
            return "the server failed: see its log"
        return likely_fix(code, base_url, info) if code in REFUSALS else ""
    if reason.startswith("connection error: certificate"):
        return ""   # the reason says what to change
    if reason.startswith("connection error"):
        return "is a server listening there? Start it (or give the model a launch command), and check the host and port"
    if reason.startswith("timeout"):
        return "the server took longer than timeout: it may still be loading, or need a larger timeout"
    if reason.startswith(("malformed JSON reply", "bad reply")):
        return "the server does not answer like an OpenAI-compatible API: check url and inference_type"
    return ""
