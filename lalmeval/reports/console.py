"""Tables for the terminal, drawn by rich: fitted to the terminal's width on a terminal, at their
natural width (nothing wrapped, no colour) when the output is a pipe or a file."""

from __future__ import annotations

import io
import sys
from typing import Callable, Iterable, Optional, Sequence, TextIO

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table

Redact = Callable[[str], str]
UNLIMITED = 100_000   # columns: a table written to a pipe keeps its natural width, one line per row


def _identity(text: str) -> str:
    return text


def is_terminal(stream: Optional[TextIO]) -> bool:
    """Whether `stream` is an interactive terminal."""
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):
        return False


def _unicode(stream: Optional[TextIO]) -> bool:
    encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("-", "")
    return encoding.startswith("utf")


def table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Iterable[int] = (), redact: Redact = _identity,
          ascii_only: bool = False) -> Table:
    """A table of text cells; `numeric` columns are right-aligned and never wrapped. Every cell passes through `redact`
    before it is laid out, so no wrapping can split a secret the redactor would have caught."""
    numeric = set(numeric)
    grid = Table(box=box.ASCII if ascii_only else box.ROUNDED, header_style="bold")
    for index, name in enumerate(header):
        # Numbers stay whole; names fold onto more lines when the terminal is narrow.
        grid.add_column(redact(name), justify="right" if index in numeric else "left", overflow="fold", no_wrap=index in numeric)
    for row in rows:
        grid.add_row(*(redact(str(cell)) for cell in row))
    return grid


def render(renderable: RenderableType, stream: Optional[TextIO] = None, width: Optional[int] = None) -> str:
    """What `renderable` prints as on `stream` (default stdout): fitted and styled on a terminal, plain
    and unwrapped otherwise. `width` fixes the width (tests render at 80 columns this way)."""
    stream = sys.stdout if stream is None else stream
    terminal = is_terminal(stream)
    if width is None:
        width = Console(file=stream).width if terminal else UNLIMITED
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=terminal, color_system="standard" if terminal else None,
                      legacy_windows=False, emoji=False, highlight=False, markup=False)
    console.print(renderable, crop=False)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").split("\n"))


def text_table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Iterable[int] = (), title: Optional[str] = None,
               redact: Redact = _identity, stream: Optional[TextIO] = None, width: Optional[int] = None) -> str:
    """A table as the text to print on `stream` (see `render`), under its title line."""
    stream = sys.stdout if stream is None else stream
    text = render(table(header, rows, numeric, redact, ascii_only=not _unicode(stream)), stream, width)
    return f"{redact(title)}:\n{text}" if title else text
