"""One pooled HTTP session per endpoint, one in-flight limit, start spacing and retries."""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from dataclasses import dataclass
from typing import Any, Optional

import aiohttp

from lalmeval.config import ModelInfo, redact
from lalmeval.inference.limit import AdaptiveLimit

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504}) | frozenset(range(520, 530))
MAX_BACKOFF = 30.0
MAX_RETRY_AFTER = 300.0


class RequestFailed(Exception):
    """A request that ended without a usable reply; `reason` is what gets recorded."""

    def __init__(self, reason: str, attempts: int, retry_wait: float = 0.0):
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts
        self.retry_wait = retry_wait


@dataclass(frozen=True)
class Reply:
    payload: Any
    attempts: int
    latency: float
    retry_wait: float = 0.0


def retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(value)))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return min(MAX_RETRY_AFTER, max(0.0, parsed.timestamp() - time.time()))


def backoff(attempt: int, base: float = 0.5) -> float:
    """Exponential backoff with full jitter in its upper half."""
    ceiling = min(MAX_BACKOFF, base * 2 ** (attempt - 1))
    return random.uniform(ceiling / 2, ceiling)


def _server_message(body: bytes) -> str:
    try:
        data = json.loads(body)
        message = data.get("error", data) if isinstance(data, dict) else data
        if isinstance(message, dict):
            message = message.get("message") or message.get("detail") or json.dumps(message)
        text = str(message)
    except (ValueError, UnicodeDecodeError):
        text = body.decode("utf-8", "replace")
    text = " ".join(text.split())
    return text[:300] or "(empty body)"


# A request that exhausted its retries on these reasons says nothing came back from the server.
_UNREACHABLE = ("connection error", "timeout")
DOWN_AFTER = 3


class Endpoint:
    """The shared client of one model entry: every Engine's requests to it pass through here."""

    def __init__(self, info: ModelInfo):
        self.info = info
        self.base_url = info.url.rstrip("/")
        self.limit = AdaptiveLimit(info.batch_size)
        self._session: Optional[aiohttp.ClientSession] = None
        self._next_start = 0.0
        self.requests_sent = 0
        self.retries = 0
        self.retry_wait = 0.0
        self._unreachable_streak = 0
        self.down_reason: Optional[str] = None
        self._token = info.auth_token.get_secret_value() if info.auth_token else ""

    def _headers(self) -> dict[str, str]:
        if not self._token:
            return {}
        return {"api-key": self._token} if self.info.api_version else {"Authorization": f"Bearer {self._token}"}

    def scrub(self, text: str) -> str:
        """`text` with the endpoint's token removed (servers sometimes echo it in errors)."""
        return redact(text, [self._token])

    async def open(self) -> None:
        """Create the pooled session (inside the running loop)."""
        connector = aiohttp.TCPConnector(limit=self.info.batch_size + 4, ttl_dns_cache=300, enable_cleanup_closed=True)
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=self._headers(),
            timeout=aiohttp.ClientTimeout(total=self.info.timeout),
            skip_auto_headers=("User-Agent",),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _pace(self) -> None:
        """Keep `delay` ms between request starts without polling: each start reserves a slot."""
        if not self.info.delay:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        start = max(now, self._next_start)
        self._next_start = start + self.info.delay / 1000.0
        if start > now:
            await asyncio.sleep(start - now)

    async def _attempt(self, path: str, body: bytes, content_type: str) -> tuple[Optional[Any], str, Optional[float], bool]:
        """One try: (payload, error, wait hint, retryable)."""
        assert self._session is not None, "Endpoint.open() was not called"
        params = {"api-version": self.info.api_version} if self.info.api_version else None
        self.requests_sent += 1
        try:
            async with self._session.post(self.base_url + path, data=body, params=params, headers={"Content-Type": content_type}) as resp:
                raw = await resp.read()
                if resp.status == 200:
                    try:
                        return json.loads(raw), "", None, False
                    except ValueError:
                        return None, f"malformed JSON reply: {raw[:120]!r}", None, True
                reason = f"HTTP {resp.status}: {_server_message(raw)}"
                return None, reason, retry_after(resp.headers.get("Retry-After")), resp.status in RETRYABLE_STATUS
        except asyncio.TimeoutError:
            return None, f"timeout after {self.info.timeout:g}s", None, True
        except aiohttp.ClientError as exc:
            return None, f"connection error: {type(exc).__name__}: {exc}".rstrip(": "), None, True

    def _observe(self, reason: str) -> None:
        """Feed one attempt's outcome to the adaptive limit."""
        if not reason:
            self.limit.succeeded()
        elif reason.startswith(("HTTP 429", "timeout")):
            self.limit.overloaded()

    def _settle(self, reason: str) -> None:
        """After a request's last attempt: track whether the endpoint is answering at all."""
        if not reason or not reason.startswith(_UNREACHABLE):
            self._unreachable_streak = 0
            return
        self._unreachable_streak += 1
        if self._unreachable_streak >= DOWN_AFTER and self.down_reason is None:
            self.down_reason = reason

    async def post(self, path: str, body: bytes, content_type: str = "application/json") -> Reply:
        """POST with retries on transient failures; raises RequestFailed with the last reason."""
        attempts_allowed = self.info.retry_attempts + 1
        started = time.perf_counter()
        waited = 0.0
        for attempt in range(1, attempts_allowed + 1):
            if self.down_reason is not None:
                raise RequestFailed(f"endpoint down ({self.down_reason}): {self.base_url}", attempt - 1, waited)
            async with self.limit:
                await self._pace()
                payload, reason, wait, retryable = await self._attempt(path, body, content_type)
            self._observe(reason)
            if not reason:
                self._settle("")
                return Reply(payload, attempt, time.perf_counter() - started, waited)
            if not retryable or attempt == attempts_allowed:
                self._settle(reason)
                raise RequestFailed(self.scrub(reason), attempt, waited)
            pause = wait if wait is not None else backoff(attempt)
            self.retries += 1
            self.retry_wait += pause
            waited += pause
            await asyncio.sleep(pause)
        raise AssertionError("unreachable")
