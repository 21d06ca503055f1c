"""Live progress of a run: the whole run's done/total, failures, rate, elapsed time and time left, then
each dataset × model pass and each endpoint. A live display (rich) on a terminal, fitted to its
width and height; plain lines every `interval` seconds when the output is a file or a pipe.

Time left comes from throughput.py: passes that send to the same server share its throughput, so
their forecasts account for one another. Samples a stopped run never requested are counted as not
run, apart from failures."""

from __future__ import annotations

import asyncio
import math
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence, TextIO

from rich.console import Console, Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from lalmeval.inference.client import Endpoint
from lalmeval.results.ledger import NOT_RUN
from lalmeval.run.throughput import RateMeter, finish_times, shared_groups


@dataclass
class PassView:
    """What progress reads from one inference pass (duck-typed on InferenceJob)."""

    label: str
    job: Any

    def counts(self) -> tuple[int, int, Optional[int]]:
        """(records published, failed ones, samples selected or None while unknown)."""
        return self.job.stream.count, self.job.stream.failed, self.job.total

    @property
    def not_run(self) -> int:
        """Records of samples the run stopped before requesting: not failures."""
        return self.job.stream.failure_kinds.get(NOT_RUN, 0)

    @property
    def servers(self) -> list[str]:
        return [e.base_url for e in self.job.endpoints]


@dataclass
class PassState:
    """One pass at one moment."""

    label: str
    dataset: str
    model: str
    done: int       # answered or failed (not the samples left not run)
    failed: int
    not_run: int
    total: Optional[int]
    closed: bool
    rate: float
    eta: Optional[float]   # seconds until it finishes; None when unknown


@dataclass
class RunState:
    """The whole run at one moment: its passes and their sums."""

    passes: list[PassState]
    elapsed: float
    stopping: bool

    @property
    def done(self) -> int:
        return sum(p.done for p in self.passes)

    @property
    def total(self) -> Optional[int]:
        totals = [p.total for p in self.passes]
        return None if any(t is None for t in totals) else sum(t for t in totals if t is not None)

    @property
    def failed(self) -> int:
        return sum(p.failed for p in self.passes)

    @property
    def not_run(self) -> int:
        return sum(p.not_run for p in self.passes)

    @property
    def rate(self) -> float:
        return sum(p.rate for p in self.passes if not p.closed)

    @property
    def eta(self) -> Optional[float]:
        """Seconds until the last pass finishes (passes on different servers run side by side)."""
        if self.stopping or any(p.eta is None for p in self.passes if not p.closed):
            return None
        return max((p.eta for p in self.passes if p.eta is not None), default=0.0)


def duration(seconds: float) -> str:
    """'42s', '3m04s', '2h05m'."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def _count(done: int, total: Optional[int]) -> str:
    return f"{done:,}/{total:,}" if total is not None else f"{done:,}/?"


def _rate(rate: float) -> str:
    return f"{rate:.1f}/s" if rate < 100 else f"{rate:,.0f}/s"


def _tallies(failed: int, not_run: int) -> list[str]:
    return ([f"{failed:,} failed"] if failed else []) + ([f"{not_run:,} not run"] if not_run else [])


def _percent(done: int, total: Optional[int]) -> str:
    return f" ({100 * done // total}%)" if total else ""


def _pace(state: RunState) -> list[str]:
    """Rate, time left and elapsed time: 'stopping' once the run stops, 'all requested' at the end."""
    parts = []
    if state.stopping:
        parts.append("stopping")
    elif state.total is not None and state.done >= state.total:
        parts.append("all requested")
    elif state.rate > 0:
        parts.append(_rate(state.rate))
    if not state.stopping and state.eta is not None and state.done < (state.total or 0):
        parts.append(f"ETA {duration(state.eta)}")
    return parts + [f"elapsed {duration(state.elapsed)}"]


def summary_line(state: RunState) -> str:
    """'2,345/10,000 done (23%), 12 failed, 3.4/s, ETA 37m30s, elapsed 1m02s'."""
    head = f"{_count(state.done, state.total)} done{_percent(state.done, state.total)}"
    return ", ".join([head, *_tallies(state.failed, state.not_run), *_pace(state)])


def pass_line(state: PassState) -> str:
    """'ds × m: 120/2,000, 3 failed, 10.2/s, ETA 3m04s', or '… — done'."""
    text = ", ".join([f"{state.label}: {_count(state.done, state.total)}", *_tallies(state.failed, state.not_run)])
    if state.closed:
        return text + " — done"
    if state.rate > 0:
        text += f", {_rate(state.rate)}"
    if state.eta is not None and state.total is not None and state.total > state.done:
        text += f", ETA {duration(state.eta)}"
    return text


def endpoint_line(name: str, endpoint: Endpoint) -> str:
    """'m http://…: 8 in flight (limit 8/8), 2 retries (1.0s waited)' or '… DOWN: reason'."""
    limit = endpoint.limit
    text = f"{name} {endpoint.shown_url}: {limit.in_flight} in flight (limit {limit.limit}/{endpoint.info.batch_size}), {endpoint.retries} retries"
    if endpoint.retry_wait:
        text += f" ({endpoint.retry_wait:.1f}s waited)"
    return text + (f" DOWN: {endpoint.down_reason}" if endpoint.down_reason else "")


class Progress:
    """Shows the passes and endpoints of a run until stopped."""

    def __init__(self, views: Sequence[PassView], endpoints: dict[str, list[Endpoint]], interval: float = 10.0,
                 stream: Optional[TextIO] = None):
        # sys.stderr as it is now, not as it was at import: the CLI wraps it (see cli._Output)
        stream = stream if stream is not None else sys.stderr
        self.views, self.endpoints, self.interval, self.stream = list(views), endpoints, interval, stream
        self.live = hasattr(stream, "isatty") and stream.isatty()
        self.started = time.monotonic()
        self.meters = [RateMeter() for _ in self.views]
        self.groups = shared_groups([v.servers for v in self.views])
        self._shown_done: set[int] = set()   # plain mode: passes whose last line was printed

    def _stopping(self) -> bool:
        return any(e.stop is not None and e.stop.is_set() for group in self.endpoints.values() for e in group)

    def state(self, now: Optional[float] = None) -> RunState:
        """Every pass's counts, recent rate and forecast finish, and the run's sums."""
        now = time.monotonic() if now is None else now
        raw = []
        for view, meter in zip(self.views, self.meters):
            done, failed, total = view.counts()
            meter.observe(now, done - view.job.reused)   # stored answers come at once: they say nothing of the pace
            raw.append((done, failed, total, view.job.stream.closed, 0.0 if view.job.stream.closed else meter.rate()))
        etas: list[Optional[float]] = [None] * len(raw)
        for group in set(self.groups):
            members = [i for i, g in enumerate(self.groups) if g == group]
            left = [0.0 if raw[i][3] else math.inf if raw[i][2] is None else max(0, raw[i][2] - raw[i][0]) for i in members]
            for i, eta in zip(members, finish_times(left, [raw[i][4] for i in members])):
                etas[i] = eta
        # A sample the stopped run never requested is settled, but not done: it counts as not run.
        passes = [PassState(view.label, view.job.dataset, view.job.name, done - view.not_run, failed - view.not_run, view.not_run,
                            total, closed, rate, eta)
                  for view, (done, failed, total, closed, rate), eta in zip(self.views, raw, etas)]
        return RunState(passes, now - self.started, self._stopping())

    def _plain(self, final: bool = False, now: Optional[float] = None) -> None:
        """A block of lines: the run, the passes still running (and those just finished), the endpoints."""
        state = self.state(now)
        shown = []
        for index, item in enumerate(state.passes):
            if index in self._shown_done:
                continue
            if item.closed:
                self._shown_done.add(index)
            shown.append("  " + pass_line(item))
        if final:
            shown = ["  " + pass_line(item) for item in state.passes]
        endpoints = ["  " + endpoint_line(name, e) for name, group in self.endpoints.items() for e in group]
        stamp = f"[{state.elapsed:6.0f}s]"
        print("\n".join([f"{stamp} {summary_line(state)}", *shown, *endpoints]), file=self.stream, flush=True)

    def renderable(self, width: int, height: int, now: Optional[float] = None) -> RenderableType:
        """The live display for a terminal of `width` × `height`: no line is wider (names are cut in their
        middle with '…') and it never runs taller (passes beyond that are counted in one line)."""
        state = self.state(now)
        head = f"{_count(state.done, state.total)} done{_percent(state.done, state.total)}"
        counts = Text(", ".join([head, *_tallies(state.failed, state.not_run)]), no_wrap=True, overflow="ellipsis")
        pace = Table.grid(expand=True, padding=(0, 1))
        pace.add_column(ratio=1)
        pace.add_column(no_wrap=True, justify="right")
        pace.add_row(ProgressBar(total=float(state.total) if state.total else None, completed=float(state.done), pulse=state.total is None),
                     Text("  ".join(_pace(state))))
        endpoints = sorted(((name, e) for name, group in self.endpoints.items() for e in group), key=lambda item: item[1].down_reason is None)
        shown = endpoints[: max(1, height // 4)]
        # The counts, the bar, two table headers, the endpoints (and a line for those left out), a spare line.
        room = max(1, height - 5 - len(shown) - (len(shown) < len(endpoints)))
        return Group(counts, pace, _pass_table(state.passes, room, width), _endpoint_table(shown, len(endpoints), width))

    async def run(self) -> None:
        """Refresh until cancelled: a live display on a terminal, a block of lines every `interval` seconds otherwise."""
        if self.live:
            await self._run_live()
            return
        self._plain()
        while True:
            await asyncio.sleep(self.interval)
            self._plain()

    async def _run_live(self) -> None:
        from rich.live import Live

        console = Console(file=self.stream)

        def current() -> RenderableType:
            return self.renderable(console.width, console.height)

        with Live(current(), console=console, refresh_per_second=4, transient=False, vertical_overflow="crop") as live:
            try:
                while True:
                    await asyncio.sleep(0.25)
                    live.update(current())
            finally:
                live.update(current())

    def finish(self) -> None:
        """The last state, whatever the mode (a short run shows at least its first and last lines)."""
        if not self.live:
            self._plain(final=True)


def _order(passes: list[PassState]) -> list[int]:
    """Running passes first (most left first), then those not begun, then finished ones."""
    def key(i: int) -> tuple[int, float]:
        item = passes[i]
        if item.closed:
            return 2, 0.0
        return (0 if item.done or item.rate else 1), -(item.eta or 0.0)
    return sorted(range(len(passes)), key=key)


def shorten(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut in the middle: names that differ only at their end
    (dataset_part_1, dataset_part_2) stay told apart."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = (width - 1 + 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def _fitted(header: list[str], rows: list[list[str]], names: int, width: int) -> Table:
    """A borderless table exactly `width` wide at most: the first `names` columns (texts) share what the
    others (short counts, right-aligned) leave, each name cut in its middle to fit its column."""
    natural = [max([len(header[c])] + [len(r[c]) for r in rows]) for c in range(len(header))]
    gaps = 2 * (len(header) - 1)
    room = max(names * 6, width - gaps - sum(natural[names:]))
    wanted = natural[:names]
    widths = list(wanted)
    while sum(widths) > room:   # take a character from the widest name column until they fit
        widest = max(range(names), key=lambda c: widths[c])
        widths[widest] -= 1
    grid = Table(box=None, pad_edge=False, show_edge=False, header_style="bold", padding=(0, 1), collapse_padding=False)
    for c, name in enumerate(header):
        if c < names:
            grid.add_column(shorten(name, widths[c]), width=widths[c], no_wrap=True, overflow="crop")
        else:
            grid.add_column(name, justify="right", no_wrap=True)
    for row in rows:
        grid.add_row(*[shorten(cell, widths[c]) if c < names else cell for c, cell in enumerate(row)])
    return grid


def _pass_table(passes: list[PassState], room: int, width: int) -> Table:
    order = _order(passes)
    shown, hidden = (order, []) if len(order) <= room else (order[: room - 1], order[room - 1:])
    not_run = any(p.not_run for p in passes)
    rows = []
    for i in shown:
        p = passes[i]
        eta = "done" if p.closed else duration(p.eta) if p.eta is not None and p.total is not None and p.done < p.total else ""
        rows.append([p.dataset, p.model, _count(p.done, p.total), f"{p.failed:,}" if p.failed else ""]
                    + ([f"{p.not_run:,}" if p.not_run else ""] if not_run else [])
                    + [_rate(p.rate) if p.rate and not p.closed else "", eta])
    if hidden:
        finished = sum(1 for i in hidden if passes[i].closed)
        rows.append([f"… {len(hidden)} more passes", f"({finished} done)"] + [""] * (len(rows[0]) - 2 if rows else 4 + not_run))
    header = ["Dataset", "Model", "Done", "Failed"] + (["Not run"] if not_run else []) + ["Rate", "ETA"]
    return _fitted(header, rows, 2, width)


def _endpoint_table(endpoints: list[tuple[str, Endpoint]], count: int, width: int) -> Table:
    rows = []
    for name, e in endpoints:
        retries = f"{e.retries}" + (f" ({e.retry_wait:.0f}s)" if e.retry_wait else "")
        rows.append([name, e.shown_url, f"DOWN: {e.down_reason}" if e.down_reason else "up",
                     f"{e.limit.in_flight}/{e.limit.limit}", retries])
    if count > len(endpoints):
        rows.append([f"… {count - len(endpoints)} more endpoints", "", "", "", ""])
    return _fitted(["Endpoint", "URL", "State", "In flight", "Retries"], rows, 3, width)
