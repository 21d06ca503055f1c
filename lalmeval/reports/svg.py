"""Hand-written SVG plots (horizontal bars with interval whiskers, histograms): small and self-contained."""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from html import escape
from typing import Callable, Optional, Sequence

# Okabe–Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#8C6D00", "#555555"]
FONT = 'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="12"'


def color(index: int) -> str:
    """The series colour of a model (wraps around after the palette)."""
    return PALETTE[index % len(PALETTE)]


@dataclass(frozen=True)
class Bar:
    """One bar: a value, an optional interval, the group it is drawn under and its series colour."""

    group: str
    label: str
    value: Optional[float]
    low: Optional[float] = None
    high: Optional[float] = None
    series: int = 0
    note: str = ""


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2 or 5 times a power of ten apart)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    start = math.floor(lo / step) * step
    ticks = [start]
    while ticks[-1] < hi - 1e-9 * step:
        ticks.append(ticks[-1] + step)
    return [round(t, 10) for t in ticks]


def _num(value: float) -> str:
    # Whole numbers in full (ticks such as 1000 must not read '1e+03'), others to three significant digits.
    return f"{value + 0.0:.0f}" if value == round(value) and abs(value) < 1e12 else f"{value:.3g}"


def _em(ch: str) -> float:
    """A character's width in em, on the generous side of common sans-serif fonts (DejaVu Sans the widest)."""
    if unicodedata.east_asian_width(ch) in "WF":
        return 1.0
    if ch in "mwMW@%":
        return 1.0
    if ch in " ilIjtfr.,:;'|!()[]":
        return 0.42
    return 0.78 if ch.isupper() else 0.64


def text_width(text: str, size: int = 12, bold: bool = False) -> float:
    """Pixels `text` takes, estimated: SVG text is drawn by the browser, not measured here."""
    return sum(map(_em, text)) * size * (1.1 if bold else 1.0)


def fit(text: str, pixels: float, size: int = 12, bold: bool = False) -> str:
    """`text`, cut short with '…' where it would run past `pixels`."""
    if text_width(text, size, bold) <= pixels:
        return text
    room, used = pixels / (size * (1.1 if bold else 1.0)) - _em("…"), 0.0
    for index, ch in enumerate(text):
        used += _em(ch)
        if used > room:
            return text[:index] + "…"
    return text


def title_lines(title: str, pixels: float, size: int = 12, most: int = 3) -> list[str]:
    """A bold title wrapped at its ' · ' separators into at most `most` lines, each cut to fit `pixels`."""
    lines: list[str] = []
    for piece in title.split(" · "):
        if lines and (text_width(f"{lines[-1]} · {piece}", size, bold=True) <= pixels or len(lines) == most):
            lines[-1] += f" · {piece}"
        else:
            lines.append(piece)
    return [fit(line, pixels, size, bold=True) for line in lines]


def _title(title: str, width: int, size: int = 12) -> tuple[str, int]:
    """A plot's <title> (the whole text, shown on hover) and its drawn lines; returns them and the height they take."""
    lines = title_lines(title, width - 8, size)
    drawn = "".join(f'<text x="4" y="{size + 2 + 15 * i}" font-weight="600" font-size="{size}">{escape(line)}</text>'
                    for i, line in enumerate(lines))
    return f"<title>{escape(title)}</title>{drawn}", 15 * len(lines)


def bar_chart(bars: Sequence[Bar], title: str, width: int = 780) -> str:
    """Horizontal bars grouped under headers, with 95% interval whiskers and the value at the right."""
    heading, title_h = _title(title, width, size=13)
    values = [_value_text(bar) for bar in bars]
    # The value column is as wide as its longest text (an interval with large numbers is long).
    label_w, row_h, top = 190, 20, title_h + 25
    value_w = int(min(330, max([120.0, *(text_width(v) + 14 for v in values)])))
    plot_w = width - label_w - value_w
    numbers = [x for b in bars for x in (b.value, b.low, b.high) if x is not None]
    ticks = nice_ticks(min([0.0, *numbers]), max([0.0, *numbers]) or 1.0)
    t0, t1 = ticks[0], ticks[-1]

    def x(v: float) -> float:
        return label_w + (v - t0) / (t1 - t0) * plot_w

    parts, y, group = [], top, None
    for bar, value in zip(bars, values):
        if bar.group != group:
            group = bar.group
            parts.append(f'<text x="4" y="{y + 14}" font-weight="600">{escape(fit(group, width - 8, bold=True))}</text>')
            y += row_h
        parts.append(_bar_row(bar, value, y, row_h, x, label_w, width - value_w + 6))
        y += row_h
    height = y + 10
    grid = "".join(f'<line x1="{x(t):.1f}" y1="{top - 4}" x2="{x(t):.1f}" y2="{y}" stroke="#ddd"/>'
                   f'<text x="{x(t):.1f}" y="{top - 8}" text-anchor="middle" fill="#555">{_num(t)}</text>' for t in ticks)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT}>{heading}{grid}{"".join(parts)}</svg>')


def _value_text(bar: Bar) -> str:
    """The value (and interval, and note) written at the right of a bar."""
    if bar.value is None:
        return ""
    text = f"{bar.value:.2f}" + (f" [{bar.low:.2f}, {bar.high:.2f}]" if bar.low is not None and bar.high is not None else "")
    return text + (f" {bar.note}" if bar.note else "")


def _bar_row(bar: Bar, value: str, y: int, row_h: int, x: Callable[[float], float], label_w: int, value_x: int) -> str:
    """One labelled bar, its whisker and its value text."""
    label = f'<text x="16" y="{y + 14}"><title>{escape(bar.label)}</title>{escape(fit(bar.label, label_w - 22))}</text>'
    if bar.value is None:
        return label + f'<text x="{label_w + 4}" y="{y + 14}" fill="#a00">no score</text>'
    x0, x1 = sorted((x(0.0), x(bar.value)))
    shape = (f'<rect x="{x0:.1f}" y="{y + 4}" width="{max(x1 - x0, 1):.1f}" height="{row_h - 8}" fill="{color(bar.series)}" '
             f'opacity="{0.45 if bar.note else 0.9}"><title>{escape(bar.label)}: {bar.value:.2f}</title></rect>')
    if bar.low is not None and bar.high is not None:
        lo, hi, mid = x(bar.low), x(bar.high), y + row_h / 2
        shape += (f'<path class="whisker" d="M{lo:.1f},{mid}H{hi:.1f}M{lo:.1f},{mid - 5}V{mid + 5}M{hi:.1f},{mid - 5}V{mid + 5}" '
                  f'stroke="#222" stroke-width="1.3" fill="none"/>')
    return label + shape + f'<text x="{value_x}" y="{y + 14}">{escape(value)}</text>'


def _caption(*parts: str) -> str:
    """The line under a histogram: its parts that are not empty, separated by ' · '."""
    return " · ".join(part for part in parts if part)


def _single_bar(value: float, count: int, series: int, left: int, top: int, plot_w: int, plot_h: int, note: str) -> str:
    mid = left + plot_w / 2
    return (f'<rect x="{mid - 12:.1f}" y="{top}" width="24" height="{plot_h}" fill="{color(series)}"><title>{_num(value)}: {count}</title></rect>'
            f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#888"/>'
            f'<text x="{left - 4}" y="{top + 9}" font-size="10" fill="#555" text-anchor="end">{count}</text>'
            f'<text x="{mid:.1f}" y="{top + plot_h + 16}" font-size="10" fill="#555" text-anchor="middle">{escape(_caption(f"all {_num(value)}", f"n = {count}", note))}</text>')


def histogram(values: Sequence[float], title: str, bins: int = 20, series: int = 0,
              markers: Sequence[tuple[str, float]] = (), width: int = 280, height: int = 150, note: str = "") -> str:
    """A histogram of `values`, with labelled vertical markers (e.g. percentiles); a long title takes more lines."""
    heading, title_h = _title(title, width)
    left, right, top, bottom = 36, 10, title_h + 11, 30
    height += title_h - 15
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="hist" role="img" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT}>{heading}')
    if not values:
        return head + f'<text x="{left}" y="{height / 2}" fill="#777">{escape(_caption("no values", note))}</text></svg>'
    lo, hi = min(values), max(values)
    if hi == lo:  # one value: a single centred bar, labelled with that value
        return head + _single_bar(values[0], len(values), series, left, top, width - left - right, height - top - bottom, note) + "</svg>"
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / (hi - lo) * bins), bins - 1)] += 1
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(counts)

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * plot_w

    bw = plot_w / bins
    rects = "".join(
        f'<rect x="{left + i * bw + 0.5:.1f}" y="{top + plot_h * (1 - c / peak):.1f}" width="{bw - 1:.1f}" '
        f'height="{plot_h * c / peak:.1f}" fill="{color(series)}"><title>{_num(lo + i * (hi - lo) / bins)}–'
        f'{_num(lo + (i + 1) * (hi - lo) / bins)}: {c}</title></rect>' for i, c in enumerate(counts) if c)
    marks = "".join(f'<line x1="{x(v):.1f}" y1="{top}" x2="{x(v):.1f}" y2="{top + plot_h}" stroke="#000" stroke-dasharray="3,2">'
                    f'<title>{escape(name)}</title></line>' for name, v in markers)
    # Marker names go in one line under the axis: labels beside close lines would overlap.
    axis = (f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#888"/>'
            f'<text x="{left}" y="{height - 14}" font-size="10" fill="#555">{_num(lo)}</text>'
            f'<text x="{left + plot_w}" y="{height - 14}" font-size="10" fill="#555" text-anchor="end">{_num(hi)}</text>'
            f'<text x="{left - 4}" y="{top + 9}" font-size="10" fill="#555" text-anchor="end">{peak}</text>'
            f'<text x="{left - 4}" y="{top + plot_h}" font-size="10" fill="#555" text-anchor="end">0</text>'
            f'<text x="{left + plot_w / 2}" y="{height - 3}" font-size="10" fill="#555" text-anchor="middle">'
            f'{escape(_caption(f"n = {len(values)}", *(name for name, _ in markers), note))}</text>')
    return head + rects + marks + axis + "</svg>"
