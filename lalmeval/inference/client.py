"""One pooled HTTP session per endpoint, one in-flight limit, start spacing and retries."""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Generic, Optional, TypeVar
from urllib.parse import urljoin

from lalmeval.config.schema import ModelInfo
from lalmeval.config.secrets import NO_SECRETS, Redactor, clip, scrub
from lalmeval.inference.azure import deployment_url
from lalmeval.inference.http import CertificateFailed, Client, HTTPError, Response
from lalmeval.inference.diagnose import REFUSALS, refusal_line, refuses_every_request
from lalmeval.inference.limit import AdaptiveLimit
from lalmeval.inference.protocols import ReplyError
from lalmeval.inference.stream import Firsts, Marks, assemble
from lalmeval.inference.urls import endpoint_url, host_of, same_host
from lalmeval.inference.waits import Wait, asked_wait, seconds_or_date
from lalmeval.results.ledger import INTERRUPTED
from lalmeval.text import mended

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504}) | frozenset(range(520, 530))
MAX_BACKOFF = 30.0
MAX_RETRY_AFTER = 300.0
ERROR_BODY_LIMIT = 64 * 1024   # an error reply is read only this far: its message is all we keep
REASON_LIMIT = 300             # characters of a server's message kept in a recorded reason
REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
STREAM_CUT = ("connection error: the stream was cut: the server closed the connection before the stream's end "
              "(no finish_reason nor [DONE] came)")
DECODE_IN_THREAD = 1 << 20   # bytes: a larger reply body (some 15 s of streamed pcm16 audio) is decoded in a thread
COALESCE = 0.05   # seconds a stream's later deltas gather in the socket between reads, once its first text and audio are timed

T = TypeVar("T")


class RequestFailed(Exception):
    """A request that ended without a usable reply; `reason` is what gets recorded (with the timings of Reply)."""

    def __init__(self, reason: str, attempts: int, retry_wait: float = 0.0, latency: float = 0.0, queued: float = 0.0):
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts
        self.retry_wait = retry_wait
        self.latency = latency
        self.queued = queued


class Interrupted(RequestFailed):
    """The run is stopping (Ctrl-C, SIGTERM, a full disk): the request was not sent, or was abandoned."""

    def __init__(self, attempts: int = 0, retry_wait: float = 0.0):
        super().__init__(INTERRUPTED, attempts, retry_wait)


@dataclass(frozen=True)
class Reply(Generic[T]):
    """A parsed reply. `latency`: the last attempt, from the request leaving to the reply read (the endpoint's
    own time); `queued`: time spent waiting for a slot here (in-flight limit, `delay` spacing), every attempt;
    `retry_wait`: the pauses between attempts."""

    value: T
    attempts: int
    latency: float
    retry_wait: float = 0.0
    queued: float = 0.0
    first_token: Optional[float] = None   # streamed replies: seconds from the request leaving to its first text ...
    first_audio: Optional[float] = None   # ... and to its first audio
    deltas: int = 0                       # streamed replies: text deltas received


@dataclass(frozen=True)
class _Outcome:
    """One attempt: a parsed value, or a reason with whether to retry and how long the server asked to wait."""

    value: Any = None
    reason: str = ""
    retryable: bool = False
    wait: Optional[Wait] = None
    status: Optional[int] = None   # the HTTP status of a non-200 answer
    first_token: Optional[float] = None   # perf_counter when a streamed reply's first text, and first audio, arrived
    first_audio: Optional[float] = None
    deltas: int = 0


def retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), capped; None when unusable."""
    seconds = seconds_or_date(value) if value else None
    return None if seconds is None else min(MAX_RETRY_AFTER, seconds)


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
    except (ValueError, UnicodeDecodeError, RecursionError):
        text = body.decode("utf-8", "replace")
    return " ".join(text.split()) or "(empty body)"


def _escapes_unicode(raw: bytes) -> bool:
    """Whether the body holds a `\\u` escape. A one-byte search first: a search for two bytes walks a body of
    base64 audio (which holds no backslash) about a hundred times more slowly."""
    return b"\\" in raw and b"\\u" in raw


def _stream_ended(payload: Any, raw: bytes) -> bool:
    """Whether an assembled stream says it ended (a finish_reason, or [DONE]), or holds the server's error."""
    choices = payload.get("choices") if isinstance(payload, dict) else None
    return b"[DONE]" in raw[-64:] or not choices or not isinstance(choices[0], dict) or bool(choices[0].get("finish_reason"))


def _since(moment: Optional[float], start: float) -> Optional[float]:
    return None if moment is None else moment - start


class _TooLarge(Exception):
    pass


# A request that exhausted its retries on these reasons got no answer at all from the server ...
_UNREACHABLE = ("connection error", "timeout")
# ... or none a server in working order gives: 5xx, a body that is not JSON, or a 200 holding an error object instead
# of choices (a gateway reporting its own failure). (Another wrong-shaped 200, such as null content, may be the
# model's answer to that one prompt: it never takes an endpoint out.)
_BROKEN = (*_UNREACHABLE, "HTTP 5", "malformed JSON reply", "bad reply: reply holds an error")
DOWN_AFTER = 3      # unreachable requests in a row (each after its retries) that take an endpoint out
BROKEN_AFTER = 8    # unreachable or broken requests in a row that take out an endpoint that still answers
REFUSED_AFTER = 5   # refusals (diagnose.REFUSALS) before any answer that stop sending to an endpoint (fewer with a small batch_size)


class Endpoint:
    """The shared client of one model entry: every Engine's requests to it pass through here."""

    def __init__(self, info: ModelInfo, redactor: Redactor = NO_SECRETS, stop: Optional[asyncio.Event] = None):
        self.info = info
        self.stop = stop   # set when the run stops: no request is sent after it
        self.base_url = deployment_url(info.url, info.model, info.api_version)   # an Azure resource root: its deployment
        self.limit = AdaptiveLimit(info.batch_size)
        self.redact = redactor
        self.shown_url = redactor(info.url)   # the URL wherever it is printed or stored: it may hold a key
        self.max_reply = int(info.max_reply_mb * 1_000_000)
        self._client: Optional[Client] = None
        self._urls: dict[str, str] = {}   # API path -> the URL it is sent to
        self._next_start = 0.0
        self.requests_sent = 0
        self.retries = 0
        self.retry_wait = 0.0
        self._unreachable_streak = 0
        self._broken_streak = 0
        self._refusal_streak = 0
        self._last_400: Optional[str] = None   # the message of a streak of identical 400s
        self.answered = 0   # requests that got a usable reply
        self.down_reason: Optional[str] = None
        self.refused: Optional[str] = None   # when every request is refused: status, URL and the likely fix, in one line
        self._token = info.auth_token.get_secret_value() if info.auth_token else ""

    def _headers(self) -> dict[str, str]:
        if not self._token:
            return {}
        return {"api-key": self._token} if self.info.api_version else {"Authorization": f"Bearer {self._token}"}

    async def open(self) -> None:
        """Create the pooled connections' client (inside the running loop)."""
        self._client = Client(self.info.timeout, verify_ssl=self.info.verify_ssl, headers=self._headers(), max_idle=self.info.batch_size + 4,
                              max_body=max(self.max_reply, ERROR_BODY_LIMIT))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

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

    @staticmethod
    async def _read(resp: Response, limit: int, strict: bool) -> bytes:
        """At most `limit` bytes of the body; with `strict`, a longer body raises _TooLarge instead."""
        if strict and resp.content_length is not None and resp.content_length > limit:
            raise _TooLarge()
        body = await resp.read(limit)
        if len(body) > limit:
            if strict:
                raise _TooLarge()
            return body[:limit]
        return body

    def _redirect(self, url: str, resp: Response) -> tuple[Optional[str], Optional[_Outcome]]:
        """Where a redirect leads when it may be followed (same host: the request goes again, credentials
        included), or the failure it is: another host never sees the request, its key, nor is scored."""
        location = resp.headers.get("Location")
        if not location:
            return None, _Outcome(reason=f"HTTP {resp.status}: redirect without a Location header")
        target = urljoin(url, location)
        if same_host(self.base_url, target):
            return target, None
        reason = (f"HTTP {resp.status}: redirected to another host, {host_of(target)}: not followed (credentials are "
                  f"never sent to another host); set url to the endpoint itself")
        return None, _Outcome(reason=clip(reason, self.redact, REASON_LIMIT))

    async def _read_marked(self, resp: Response, limit: int, reads: str) -> tuple[bytes, Marks]:
        """The body (at most `limit` bytes, else _TooLarge) with when each piece of it arrived: one clock read per network read.
        A stream's first text and audio are timed read by read; after them its deltas are taken COALESCE seconds at a
        time (the socket holds them meanwhile), so a reply of hundreds of deltas costs tens of reads, not hundreds."""
        if resp.content_length is not None and resp.content_length > limit:
            raise _TooLarge()
        firsts = Firsts(audio=self.info.speaks) if reads == "json" else None
        chunks, marks, size = [], [], 0
        while pieces := await resp.next_pieces():
            for chunk, arrived in pieces:
                size += len(chunk)
                if size > limit:
                    raise _TooLarge()
                chunks.append(chunk)
                marks.append((size, arrived))
                if firsts is not None and not firsts.seen:
                    firsts.feed(chunk)
            if (firsts is None or firsts.seen) and not resp.done:
                resp.pause_reading()
                try:
                    await asyncio.sleep(COALESCE - asyncio.get_running_loop().time() % COALESCE)
                finally:
                    resp.resume_reading()
        return b"".join(chunks), marks

    async def _attempt(self, path: str, body: bytes, content_type: str, parse: Callable[[Any], Any], reads: str = "json") -> _Outcome:
        """One try, turned into an outcome whatever happens on the wire."""
        assert self._client is not None, "Endpoint.open() was not called"
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = endpoint_url(self.base_url, path, {"api-version": self.info.api_version} if self.info.api_version else None)
        self.requests_sent += 1
        headers = {"Content-Type": content_type}
        try:
            for _ in range(MAX_REDIRECTS + 1):
                # Redirects are followed here, never silently: the api-key header must not reach another host.
                request = await self._client.post(url, body, headers)
                try:
                    resp = request.response
                    assert resp is not None
                    if resp.status in REDIRECTS:
                        url, refused = self._redirect(url, resp)
                        if refused is not None:
                            return refused
                        continue
                    if resp.status != 200:
                        raw = await self._read(resp, ERROR_BODY_LIMIT, strict=False)
                        reason = f"HTTP {resp.status}: " + clip(_server_message(raw), self.redact, REASON_LIMIT)
                        return _Outcome(reason=reason, retryable=resp.status in RETRYABLE_STATUS, wait=asked_wait(resp.headers),
                                        status=resp.status)
                    if self.info.stream:   # timed as it arrives
                        raw, marks = await self._read_marked(resp, self.max_reply, reads)
                    else:
                        raw, marks = await self._read(resp, self.max_reply, strict=True), []
                    break
                finally:
                    request.release()
            else:
                return _Outcome(reason=f"more than {MAX_REDIRECTS} redirects")
        except _TooLarge:
            return _Outcome(reason=f"reply too large: more than {self.info.max_reply_mb:g} MB (max_reply_mb)")
        except asyncio.TimeoutError:
            return _Outcome(reason=f"timeout after {self.info.timeout:g}s", retryable=True)
        except CertificateFailed as exc:
            # Retrying cannot make a certificate trusted; the reason says what to change.
            reason = f"connection error: certificate not trusted (verify_ssl: false accepts a self-signed one): {exc.certificate_error}"
            return _Outcome(reason=clip(reason, self.redact, REASON_LIMIT))
        except HTTPError as exc:
            return _Outcome(reason=clip(f"connection error: {exc}".rstrip(": "), self.redact, REASON_LIMIT), retryable=True)
        if reads == "binary":
            return self._binary(raw, marks, parse)
        streamed = self.info.stream and (resp.content_type or "").startswith("text/event-stream")
        decode = partial(self._decode_stream, raw, marks, parse, resp.by_close) if streamed else partial(self._decode, raw, parse)
        if len(raw) > DECODE_IN_THREAD:   # the event loop only waits: a long spoken reply takes milliseconds to read
            return await asyncio.get_running_loop().run_in_executor(None, decode)
        return decode()

    def _binary(self, raw: bytes, marks: Marks, parse: Callable[[Any], Any]) -> _Outcome:
        """A body that is the reply itself (an audio file); streamed, its first bytes are its first audio."""
        try:
            value = parse(raw)
        except ReplyError as exc:
            return _Outcome(reason=clip(f"bad reply: {exc}", self.redact, REASON_LIMIT), retryable=True)
        return _Outcome(value=value, first_audio=marks[0][1] if marks and self.info.stream else None)

    def _decode_stream(self, raw: bytes, marks: Marks, parse: Callable[[Any], Any], by_close: bool = False) -> _Outcome:
        """A streamed (SSE) body → its deltas assembled into one completion, parsed as a whole one is, with its first arrivals.
        `by_close`: the body ended where the server closed (HTTP/1.0): only the stream itself can say it was whole."""
        try:
            assembled = assemble(raw, marks)
        except (ValueError, RecursionError) as exc:
            return _Outcome(reason=clip(f"malformed JSON reply: {exc}", self.redact, 200), retryable=True)
        payload = assembled.payload
        if by_close and not _stream_ended(payload, raw):   # the text so far is not what the model said
            return _Outcome(reason=STREAM_CUT, retryable=True)
        if _escapes_unicode(raw):  # as in _decode: a lone surrogate is mended before anything reads it
            payload = mended(payload)
        payload = scrub(payload, self.redact) if self.redact else payload
        try:
            value = parse(payload)
        except ReplyError as exc:
            return _Outcome(reason=clip(f"bad reply: {exc}", self.redact, REASON_LIMIT), retryable=True)
        return _Outcome(value=value, first_token=assembled.first_token, first_audio=assembled.first_audio, deltas=assembled.deltas)

    def _decode(self, raw: bytes, parse: Callable[[Any], Any]) -> _Outcome:
        """A 200 body → the parsed value; malformed JSON and wrong shapes are retryable failures."""
        try:
            payload = json.loads(raw)
            if _escapes_unicode(raw):  # "\ud800" decodes to text nothing can encode: mended before anything reads it
                payload = mended(payload)
            # A server may echo the caller's token, and JSON may spell it in any escape (`\/`, `\u0041`):
            # the decoded strings are what reach a record or the cache, so they are what is redacted.
            payload = scrub(payload, self.redact) if self.redact else payload
        except (ValueError, RecursionError):
            # Redacted before it is cut: the cut could leave part of an echoed key that only the whole text names.
            shown = clip(raw[:65536].decode("utf-8", "replace"), self.redact, 120)
            return _Outcome(reason=f"malformed JSON reply: {shown!r}", retryable=True)
        try:
            return _Outcome(value=parse(payload))
        except ReplyError as exc:
            return _Outcome(reason=clip(f"bad reply: {exc}", self.redact, REASON_LIMIT), retryable=True)

    def _observe(self, reason: str) -> None:
        """Feed one attempt's outcome to the adaptive limit."""
        if not reason:
            self.limit.succeeded()
        elif reason.startswith(("HTTP 429", "timeout")):
            self.limit.overloaded()

    def _settle(self, outcome: _Outcome, path: str) -> None:
        """After a request's last attempt: track whether the endpoint answers usefully at all. Unreachable or
        broken requests in a row take it out (down). Refusals before its first answer stop it a few requests in, with
        their diagnosis; once it has answered, a refusal is about its sample (a 422 for one prompt), not the endpoint."""
        self.answered += not outcome.reason
        self._unreachable_streak = self._unreachable_streak + 1 if outcome.reason.startswith(_UNREACHABLE) else 0
        self._broken_streak = self._broken_streak + 1 if outcome.reason.startswith(_BROKEN) else 0
        message = outcome.reason.split(": ", 1)[-1]
        # A 400 counts only while every one so far says the same (see diagnose.refuses_every_request).
        same_400 = refuses_every_request(outcome.status, message) and self._last_400 in (None, message)
        self._last_400 = message if same_400 else None
        self._refusal_streak = self._refusal_streak + 1 if outcome.status in REFUSALS or same_400 else 0
        if self.down_reason is not None:
            return
        if self._unreachable_streak >= DOWN_AFTER or self._broken_streak >= BROKEN_AFTER:
            self.down_reason = outcome.reason
        elif not self.answered and self._refusal_streak >= min(REFUSED_AFTER, self.info.batch_size + 1):  # at most 2 x batch_size sent
            line = refusal_line(outcome.status, outcome.reason.split(": ", 1)[-1], self.shown_url, path, self.info)
            self.refused = f"the first {self._refusal_streak} requests were refused: {line}"
            self.down_reason = f"refused: HTTP {outcome.status}"

    def unavailable(self) -> str:
        """Why a request is not sent here any more (recorded as its failure)."""
        if self.refused is not None:
            return f"endpoint refused: {self.refused}"
        return f"endpoint down ({self.down_reason}): {self.shown_url}"

    def _beyond_patience(self, outcome: _Outcome) -> str:
        """A wait asked for beyond MAX_RETRY_AFTER: sleeping it would stall the run, retrying sooner would only be
        refused again (and may lengthen a rate limiter's ban). The sample fails saying when to retry, and so does
        every later request to this endpoint, without being sent (a resume after that time asks them again)."""
        asked = outcome.wait
        assert asked is not None
        until = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(time.time() + asked.seconds))
        if self.down_reason is None:
            self.down_reason = f"it asked to wait {asked.seconds:,.0f}s ({asked.header}), until {until}"
        return (f"{outcome.reason} (the server asked to wait {asked.seconds:,.0f}s ({asked.header}) before a retry, more than "
                f"the {MAX_RETRY_AFTER:g}s a retry waits: resume the run after {until})")

    def _check_stop(self, attempt: int, waited: float) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Interrupted(attempt - 1, waited)

    async def post(self, path: str, body: bytes, content_type: str, parse: Callable[[Any], T], reads: str = "json") -> Reply[T]:
        """POST and parse with retries on transient failures; raises RequestFailed with the last reason. `reads`: json
        (an SSE stream too, when the entry streams), or binary (the body is the reply, e.g. speech)."""
        attempts_allowed = self.info.retry_attempts + 1
        waited = queued = latency = 0.0
        for attempt in range(1, attempts_allowed + 1):
            if self.down_reason is not None:
                raise RequestFailed(self.unavailable(), attempt - 1, waited, latency, queued)
            self._check_stop(attempt, waited)
            asked = time.perf_counter()
            async with self.limit:
                await self._pace()
                sent = time.perf_counter()
                queued += sent - asked
                self._check_stop(attempt, waited)  # the run may have stopped while this request waited its turn
                if self.down_reason is not None:   # ... or the endpoint was found down or refusing
                    raise RequestFailed(self.unavailable(), attempt - 1, waited, latency, queued)
                outcome = await self._attempt(path, body, content_type, parse, reads)
                latency = time.perf_counter() - sent
            self._observe(outcome.reason)
            if not outcome.reason:
                self._settle(outcome, path)
                return Reply(outcome.value, attempt, latency, waited, queued, _since(outcome.first_token, sent),
                             _since(outcome.first_audio, sent), outcome.deltas)
            if not outcome.retryable or attempt == attempts_allowed:
                self._settle(outcome, path)
                raise RequestFailed(outcome.reason, attempt, waited, latency, queued)
            if outcome.wait is not None and outcome.wait.seconds > MAX_RETRY_AFTER:
                self._settle(outcome, path)
                raise RequestFailed(self._beyond_patience(outcome), attempt, waited, latency, queued)
            pause = outcome.wait.seconds if outcome.wait is not None else backoff(attempt)
            self.retries += 1
            self.retry_wait += pause
            waited += pause
            await asyncio.sleep(pause)
        raise AssertionError("unreachable")
