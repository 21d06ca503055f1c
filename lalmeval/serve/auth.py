"""The API key a server may require: every route but /health answers 401 without it, as OpenAI's API does."""

from __future__ import annotations

import hmac
from typing import Optional

from aiohttp import web

from lalmeval.serve.errors import ApiError, Handler

OPEN_PATHS = frozenset({"/health"})  # liveness probes carry no key


def _presented(request: web.Request) -> Optional[str]:
    """The key the client sent: `Authorization: Bearer …` (the OpenAI SDK), or `api-key: …` (Azure-style clients)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("api-key") or None


def require_key(key: str):
    """Middleware refusing requests without `key`; the refusal never repeats what was sent."""
    expected = key.encode("utf-8")

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in OPEN_PATHS:
            sent = _presented(request)
            if sent is None:
                raise ApiError(401, "no API key given: send it as 'Authorization: Bearer <key>'", code="invalid_api_key")
            # headers arrive as UTF-8 with undecodable bytes kept as surrogates: any bytes at all are just a wrong key
            if not hmac.compare_digest(sent.encode("utf-8", "surrogatepass"), expected):
                raise ApiError(401, "incorrect API key", code="invalid_api_key")
        return await handler(request)

    return check
