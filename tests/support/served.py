"""`lalmeval serve` started as a real subprocess on a free port, for the tests of the server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

import openai


class Served:
    """A running `lalmeval serve --port 0 ...`: its URL, an openai client, raw HTTP helpers; a context manager."""

    def __init__(self, *args: str, cwd: Optional[Path] = None, module: Optional[list[str]] = None, timeout: float = 120,
                 env: Optional[dict[str, str]] = None):
        command = [sys.executable, "-m", *(module or ["lalmeval", "serve"]), "--port", "0", *args]
        self.proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=None if env is None else {**os.environ, **env})
        self.output: list[str] = []
        self.url = self._wait_for_port(timeout)
        self.client = openai.OpenAI(base_url=self.url, api_key="unused", max_retries=0, timeout=120)

    def _wait_for_port(self, timeout: float) -> str:
        found: dict[str, str] = {}
        ready = threading.Event()

        def read() -> None:  # keeps draining afterwards, so the server never blocks on a full pipe
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                match = re.search(r"on (http://\S+/v1)", line)
                if match and not ready.is_set():
                    found["url"] = match.group(1)
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.time() + timeout
        while not ready.wait(0.2):
            assert self.proc.poll() is None and time.time() < deadline, "".join(self.output)
        assert "url" in found, "the server ended before it listened:\n" + "".join(self.output)
        return found["url"]

    def raw(self, method: str, path: str, body: Optional[bytes] = None, headers: Optional[dict[str, str]] = None) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) of one plain HTTP request."""
        request = urllib.request.Request(self.url.removesuffix("/v1") + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def health(self) -> dict[str, Any]:
        return json.loads(self.raw("GET", "/health")[2])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "Served":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
