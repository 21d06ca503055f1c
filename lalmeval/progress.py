"""Live progress of a run: per dataset × model done/total, failed, rate and ETA; per endpoint its
in-flight limit, retries and state. A live table on a terminal; plain lines when output is a file."""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence, TextIO

from lalmeval.inference.client import Endpoint


@dataclass
class PassView:
    """What progress reads from one inference pass (duck-typed on InferenceJob)."""

    label: str
    job: Any

    def counts(self) -> tuple[int, int, Optional[int]]:
        return self.job.stream.count, self.job.stream.failed, self.job.total


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def pass_line(view: PassView, now: float) -> str:
    """'ds × m: 120/2000, 3 failed, 10.2/s, ETA 3m04s'."""
    done, failed, total = view.counts()
    started = view.job.started
    elapsed = now - started if started else 0.0
    rate = done / elapsed if elapsed > 0 else 0.0
    text = f"{view.label}: {done}/{total if total is not None else '?'}"
    if failed:
        text += f", {failed} failed"
    if view.job.stream.closed:
        return text + " — done"
    if rate > 0:
        text += f", {rate:.1f}/s"
        if total is not None and total > done:
            text += f", ETA {_duration((total - done) / rate)}"
    return text


def endpoint_line(name: str, endpoint: Endpoint) -> str:
    """'m http://…: 8/8 in flight (limit 8), 2 retries (1.0s waited)' or '… DOWN: reason'."""
    limit = endpoint.limit
    text = f"{name} {endpoint.shown_url}: {limit.in_flight} in flight (limit {limit.limit}/{endpoint.info.batch_size}), {endpoint.retries} retries"
    if endpoint.retry_wait:
        text += f" ({endpoint.retry_wait:.1f}s waited)"
    return text + (f" DOWN: {endpoint.down_reason}" if endpoint.down_reason else "")


class Progress:
    """Shows the passes and endpoints of a run until stopped."""

    def __init__(self, views: Sequence[PassView], endpoints: dict[str, list[Endpoint]], interval: float = 10.0, stream: Optional[TextIO] = None):
        # sys.stderr as it is now, not as it was at import: the CLI wraps it (see cli._Output)
        stream = stream if stream is not None else sys.stderr
        self.views, self.endpoints, self.interval, self.stream = list(views), endpoints, interval, stream
        self.live = hasattr(stream, "isatty") and stream.isatty()
        self.started = time.monotonic()

    def lines(self) -> list[str]:
        now = time.monotonic()
        lines = [pass_line(v, now) for v in self.views]
        lines += [endpoint_line(name, e) for name, group in self.endpoints.items() for e in group]
        return lines

    def _plain(self) -> None:
        stamp = f"[{time.monotonic() - self.started:6.0f}s]"
        print(stamp + " " + " | ".join(self.lines()), file=self.stream, flush=True)

    async def run(self) -> None:
        """Refresh until cancelled: a live table on a terminal, a line every `interval` seconds otherwise."""
        if self.live:
            await self._run_live()
            return
        self._plain()
        while True:
            await asyncio.sleep(self.interval)
            self._plain()

    async def _run_live(self) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        console = Console(file=self.stream)
        with Live(Text("\n".join(self.lines())), console=console, refresh_per_second=4, transient=False) as live:
            try:
                while True:
                    await asyncio.sleep(0.25)
                    live.update(Text("\n".join(self.lines())))
            finally:
                live.update(Text("\n".join(self.lines())))

    def finish(self) -> None:
        """The last state, whatever the mode (a short run shows at least its first and last lines)."""
        if not self.live:
            self._plain()
