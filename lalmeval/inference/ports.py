"""`{port}` in a model's url: free ports picked when the run starts, one per replica."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from lalmeval.errors import UserError

PORT = "{port}"


def free_ports(host: str, count: int) -> list[int]:
    """`count` distinct ports nothing listens on at `host` now (all held open until every one is picked)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            sockets.append(sock)
            sock.bind((host, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def fill_ports(template: str, count: int, where: str) -> list[str]:
    """The template URL with `{port}` replaced by `count` free ports of its host."""
    host = urlsplit(template.replace(PORT, "1")).hostname or "127.0.0.1"
    try:
        ports = free_ports(host, count)
    except OSError as exc:
        raise UserError(f"{where}: url {template} uses {PORT}, but no port can be opened at {host} ({exc.strerror or exc}): "
                        f"{PORT} needs a host of this machine (127.0.0.1)") from None
    return [template.replace(PORT, str(port)) for port in ports]
