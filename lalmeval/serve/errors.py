"""Every answer that is not a success is an OpenAI error object with the right status, never a traceback."""

from __future__ import annotations

import sys
import traceback
from typing import Any, Awaitable, Callable, Optional

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error", 405: "invalid_request_error",
          413: "invalid_request_error", 422: "invalid_request_error", 503: "server_error"}


class ApiError(Exception):
    """A request the server refuses: its HTTP status and the message the client reads."""

    def __init__(self, status: int, message: str, param: Optional[str] = None, headers: Optional[dict[str, str]] = None,
                 code: Optional[str] = None):
        super().__init__(message)
        self.status, self.message, self.param, self.headers, self.code = status, message, param, headers or {}, code

    def __reduce__(self):  # crosses from a worker process to the server intact
        return ApiError, (self.status, self.message, self.param, self.headers, self.code)


class BadRequest(ApiError):
    """HTTP 400: the request is malformed or holds an invalid value."""

    def __init__(self, message: str, param: Optional[str] = None):
        super().__init__(400, message, param)


class Unsupported(ApiError):
    """HTTP 422: a well-formed request this model cannot do (images, translation, ...)."""

    def __init__(self, message: str, param: Optional[str] = None):
        super().__init__(422, message, param)


def error_response(status: int, message: str, param: Optional[str] = None, headers: Optional[dict[str, str]] = None,
                   code: Optional[str] = None) -> web.Response:
    """The OpenAI error object: {"error": {"message", "type", "param", "code"}} (code: OpenAI's name when it has one, else the status)."""
    body: dict[str, Any] = {"message": message, "type": _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
                            "param": param, "code": code or status}
    return web.json_response({"error": body}, status=status, headers=headers)


def _http_message(exc: web.HTTPException, request: web.Request) -> str:
    if exc.status == 404:
        return f"no route {request.method} {request.path} (routes: GET /v1/models, GET /v1/models/{{id}}, POST /v1/chat/completions, POST /v1/audio/transcriptions, POST /v1/audio/translations, POST /v1/audio/speech, GET /health)"
    if exc.status == 405:
        allowed = ", ".join(sorted(getattr(exc, "allowed_methods", ()) or ()))
        return f"method {request.method} is not allowed on {request.path}" + (f" (allowed: {allowed})" if allowed else "")
    if exc.status == 413:
        return f"request body too large (at most {request.app._client_max_size // (1024 * 1024)} MB)"
    return exc.reason or str(exc)


def hidden(message: str, secret: Optional[str]) -> str:
    """`message` with every spelling of `secret` in it replaced: a client's error never repeats the key, wherever it was sent."""
    if not secret or secret not in message:
        return message
    return message.replace(secret, "[the API key]")


def json_protocol_errors(secret: Optional[str] = None) -> None:
    """Make aiohttp's own answers to requests it cannot even parse (a bad request line or header, answered
    before any middleware runs) OpenAI error objects too. Patched on aiohttp's handler class, so it is
    called only by `lalmeval serve`, in a process that serves nothing else."""
    from aiohttp import web_protocol

    original = web_protocol.RequestHandler.handle_error
    if getattr(original, "json_errors", False):
        return

    def handle_error(self: Any, request: Any, status: int = 500, exc: Optional[BaseException] = None, message: Optional[str] = None) -> web.StreamResponse:
        plain = original(self, request, status, exc, message)  # logs the error as aiohttp does
        text = (plain.text or "").strip() if isinstance(plain, web.Response) else ""
        response = error_response(status, hidden(" ".join(text.split()), secret) or f"HTTP {status}")
        response.force_close()
        return response

    handle_error.json_errors = True  # type: ignore[attr-defined]
    web_protocol.RequestHandler.handle_error = handle_error  # type: ignore[method-assign]


def json_errors(secret: Optional[str] = None) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """Middleware turning refusals, aiohttp's own 404/405/413 and any bug into OpenAI error objects that never quote `secret`."""

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            return error_response(exc.status, hidden(exc.message, secret), exc.param, exc.headers, exc.code)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
            return error_response(exc.status, hidden(_http_message(exc, request), secret), headers=headers)
        except Exception as exc:  # noqa: BLE001 - a bug must cost one request, not the server, and never show a traceback
            traceback.print_exc(file=sys.stderr)  # into the server's own log, for whoever runs it
            return error_response(500, hidden(f"internal error: {type(exc).__name__}: {exc}", secret))

    return errors
