"""Endpoint URLs: API paths joined to a base URL that may carry a ?query, and which redirects are safe."""

from __future__ import annotations

from typing import Optional
from urllib.parse import urlencode, urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def endpoint_url(base: str, path: str, query: Optional[dict[str, str]] = None) -> str:
    """`base` with `path` appended to its path, before its ?query (which is kept), plus `query`.

    `https://host/v1?tenant=a` + `/chat/completions` is `https://host/v1/chat/completions?tenant=a`:
    appending to the string would put the path inside the query."""
    parts = urlsplit(base)
    fields = [parts.query] if parts.query else []
    if query:
        fields.append(urlencode(query))
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path, query="&".join(fields), fragment=""))


def host_of(url: str) -> str:
    """`host` or `host:port` of a URL, as named in messages (never its path, query or user info)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or "(no host)"
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host


def same_host(origin: str, target: str) -> bool:
    """Whether a redirect from `origin` to `target` stays on the same server, so credentials may follow:
    the same host name and port, or the same host moving from http to https on the default ports.
    A move to https→http would send them in clear text, and any other host is someone else."""
    a, b = urlsplit(origin), urlsplit(target)
    if b.scheme not in DEFAULT_PORTS or (a.scheme, b.scheme) == ("https", "http"):
        return False
    if not a.hostname or (a.hostname or "").lower() != (b.hostname or "").lower():
        return False
    try:
        ports = (a.port or DEFAULT_PORTS[a.scheme], b.port or DEFAULT_PORTS[b.scheme])
        explicit = a.port is not None or b.port is not None
    except (ValueError, KeyError):
        return False
    return ports[0] == ports[1] or ((a.scheme, b.scheme) == ("http", "https") and not explicit)
