"""Free local ports for test servers: never a fixed number, so tests run beside anything else."""

from __future__ import annotations

import random
import socket


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_port_pair() -> int:
    """Two consecutive free ports (for `replicas: N` on consecutive ports), below the ephemeral range
    where outgoing connections take theirs."""
    for _ in range(200):
        port = random.randrange(20000, 30000)
        try:
            with socket.socket() as first, socket.socket() as second:
                first.bind(("127.0.0.1", port))
                second.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no two consecutive free ports found")


def port_is_free(port: int) -> bool:
    """Whether nothing listens on `port` (a server that should have stopped has)."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0
