"""How long a server asks us to wait before retrying, in each form servers and gateways say it.

`Retry-After` (seconds or an HTTP date) is the standard. OpenAI and Azure also send
`retry-after-ms`; OpenAI's rate limiter says when each limit resets in `x-ratelimit-reset-requests`
and `x-ratelimit-reset-tokens` (Go durations: "1s", "6m0s", "20ms"); a LiteLLM proxy passes the
provider's headers on with an `llm_provider-` prefix. The most precise form wins."""

from __future__ import annotations

import email.utils
import math
import re
import time
from typing import Callable, Mapping, NamedTuple, Optional

PROXY_PREFIX = "llm_provider-"   # LiteLLM: the upstream provider's own header, passed on
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


class Wait(NamedTuple):
    """A wait a server asked for: seconds from now, and the header that said so."""

    seconds: float
    header: str


def _finite(seconds: float) -> Optional[float]:
    return None if math.isnan(seconds) else max(0.0, seconds)


def seconds_or_date(value: str) -> Optional[float]:
    """Retry-After: delta-seconds (a float is tolerated) or an HTTP date; None when it is neither."""
    try:
        return _finite(float(value))
    except ValueError:
        pass
    try:
        return _finite(email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def milliseconds(value: str) -> Optional[float]:
    """retry-after-ms: milliseconds."""
    try:
        return _finite(float(value) / 1000.0)
    except ValueError:
        return None


def duration(value: str) -> Optional[float]:
    """A Go duration ("1s", "6m0s", "1h2m3.5s", "20ms") or a plain number of seconds."""
    text = value.strip()
    try:
        return _finite(float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return _finite(sum(float(number) * _UNITS[unit] for number, unit in parts))


# The forms a retry wait comes in, most precise first: the first header present and readable decides.
FORMS: list[tuple[str, Callable[[str], Optional[float]]]] = [
    ("retry-after-ms", milliseconds),
    ("retry-after", seconds_or_date),
]
RESETS = ("requests", "tokens")   # x-ratelimit-reset-<kind>, read when x-ratelimit-remaining-<kind> is 0


def _header(headers: Mapping[str, str], name: str) -> tuple[Optional[str], str]:
    """A header's value and the name it came under: its own, else LiteLLM's prefixed copy."""
    for key in (name, PROXY_PREFIX + name):
        value = headers.get(key)
        if value is not None and value.strip():
            return value.strip(), key
    return None, name


def _reset(headers: Mapping[str, str]) -> Optional[Wait]:
    """The latest reset among the rate limits that are used up (all of them when none says what is left)."""
    found = []
    for kind in RESETS:
        value, name = _header(headers, f"x-ratelimit-reset-{kind}")
        remaining, _ = _header(headers, f"x-ratelimit-remaining-{kind}")
        seconds = duration(value) if value is not None else None
        if seconds is not None:
            found.append((remaining is None or remaining.strip() in ("0", "0.0"), Wait(seconds, name)))
    exhausted = [wait for used_up, wait in found if used_up]
    return max(exhausted, default=None)


def asked_wait(headers: Mapping[str, str]) -> Optional[Wait]:
    """The wait a reply asks for before the next attempt, uncapped; None when it asks for none we can read."""
    for name, parse in FORMS:
        value, key = _header(headers, name)
        seconds = parse(value) if value is not None else None
        if seconds is not None:
            return Wait(seconds, key)
    return _reset(headers)
