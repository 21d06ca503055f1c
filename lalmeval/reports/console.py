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


def _longest_word(texts: Iterable[str]) -> int:
    return max((len(word) for text in texts for word in text.split()), default=1)


def table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: Iterable[int] = (), redact: Redact = _identity,
          ascii_only: bool = False, compact: bool = False) -> Table:
    """A table of text cells; `numeric` columns are right-aligned. Every cell passes through `redact` before it is
    laid out, so no wrapping can split a secret the redactor would have caught. Cells wrap between words, and no
    column is narrower than its longest word (a word is split only when no layout keeps it whole); `compact`
    draws no border and no padding (columns a space apart), for a narrow terminal."""
    numeric = set(numeric)
    header = [redact(name) for name in header]
    cells = [[redact(str(cell)) for cell in row] for row in rows]
    drawing = box.ASCII if ascii_only else box.ROUNDED
    grid = (Table(box=box.ASCII if ascii_only else box.SIMPLE_HEAD, header_style="bold", show_edge=False, padding=0) if compact
            else Table(box=drawing, header_style="bold"))
    for index, name in enumerate(header):
        column = [name, *(row[index] for row in cells if index < len(row))]
        grid.add_column(name, justify="right" if index in numeric else "left", overflow="fold", min_width=_longest_word(column))
    for row in cells:
        grid.add_row(*row)
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
    rows = [list(row) for row in rows]
    ascii_only = not _unicode(stream)
    text = render(table(header, rows, numeric, redact, ascii_only), stream, width)
    limit = width or (Console(file=stream).width if is_terminal(stream) else UNLIMITED)
    if max(map(len, text.splitlines()), default=0) > limit:   # too wide for its words: the narrower drawing, else one row a block
        text = render(table(header, rows, numeric, redact, ascii_only, compact=True), stream, width)
        if max(map(len, text.splitlines()), default=0) > limit:
            text = _blocks(header, rows, redact, limit)
    return f"{redact(title)}:\n{text}" if title else text


def _blocks(header: Sequence[str], rows: Sequence[Sequence[str]], redact: Redact, width: int) -> str:
    """Each row as `Header: value` pairs, wrapped between pairs: for a terminal too narrow for the table's words."""
    lines = []
    for row in rows:
        line = ""
        for name, cell in zip(header, row):
            pair = f"{redact(name)}: {redact(str(cell))}"
            if line and len(line) + 3 + len(pair) > width:
                lines.append(line)
                line = "  " + pair
            else:
                line = f"{line} · {pair}" if line else pair
        lines.append(line)
    return "\n".join(lines)
