"""Small charts drawn as inline SVG: columns (grouped, negative values allowed), histograms
and horizontal bars. No script, no dependency; each bar carries a tooltip (``<title>``).
Colours and fonts come from the page's stylesheet (classes ``axis``, ``grid``, ``label``)."""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tracegen.terminal import printable


def escape(text: str) -> str:
    """Text for HTML: control and bidirectional characters shown as escapes (`printable`, so a
    right-to-left override cannot reorder a label), then HTML-escaped."""
    return html.escape(printable(text))


WIDTH = 480
HEIGHT = 230
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 28, 40
ROW = 22
LABEL_CHARS = 34
MAX_BINS = 20
MAX_X_LABELS = 10
CHAR_WIDTH = 6.2
NARROW_CHAR_WIDTH = 5.4

Format = Callable[[float], str]


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float]
    color: str


def number(value: float) -> str:
    """A short label: 1.2k, 350, 0.25, -1.5."""
    value = round(value, 9) + 0.0
    if abs(value) >= 10_000:
        return f"{value / 1000:,.0f}k"
    if abs(value) >= 1000:
        return f"{value / 1000:.1f}k"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def percent(value: float) -> str:
    return f"{value:.0%}"


def nice_ticks(low: float, high: float, count: int = 4) -> list[float]:
    """Round tick values covering [low, high] (steps of 1, 2 or 5 times a power of ten)."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while value < high + step * 0.999:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _svg(width: int, height: int, body: list[str], label: str, fixed: bool = False) -> str:
    size = f' style="max-width: {width}px"' if fixed else ""
    return (
        f'<svg class="chart"{size} viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}">' + "".join(body) + "</svg>"
    )


def _legend(series: Sequence[Series], width: int) -> list[str]:
    out = []
    x = width - RIGHT
    for s in reversed(series):
        x -= 14 + 7 * len(s.name)
        out.append(f'<rect x="{x}" y="6" width="10" height="10" rx="2" fill="{s.color}"/>')
        out.append(f'<text class="label" x="{x + 14}" y="15">{escape(s.name)}</text>')
        x -= 10
    return out


def columns(
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    title: str,
    fmt: Format = number,
    y_range: tuple[float, float] | None = None,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """Vertical bars, one group per label, one bar per series; values may be negative."""
    values = [v for s in series for v in s.values] or [0.0]
    n = max(len(labels), 1)
    every = math.ceil(n / MAX_X_LABELS)
    wrapped = max(map(len, labels), default=0) * CHAR_WIDTH > (width - LEFT - RIGHT) / n * every
    bottom = BOTTOM + 14 * wrapped
    height += 14 * wrapped
    low, high = y_range or (min(0.0, *values), max(0.0, *values))
    ticks = nice_ticks(low, high)
    low, high = min(low, ticks[0]), max(high, ticks[-1])
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - bottom

    def y(v: float) -> float:
        return TOP + plot_h * (high - v) / (high - low)

    body = []
    for t in ticks:
        body.append(
            f'<line class="grid" x1="{LEFT}" x2="{width - RIGHT}" y1="{y(t):.1f}" y2="{y(t):.1f}"/>'
        )
        body.append(
            f'<text class="axis" x="{LEFT - 6}" y="{y(t) + 4:.1f}" text-anchor="end">'
            f"{escape(fmt(t))}</text>"
        )
    group = plot_w / n
    bar = min(group * 0.8 / max(len(series), 1), 48)
    for i, label in enumerate(labels):
        x0 = LEFT + group * i + (group - bar * len(series)) / 2
        for j, s in enumerate(series):
            v = s.values[i]
            upper, lower = sorted((y(v), y(0)))
            tip = f"{label} · {s.name}: {fmt(v)}" if len(series) > 1 else f"{label}: {fmt(v)}"
            body.append(
                f'<rect x="{x0 + j * bar:.1f}" y="{upper:.1f}" width="{max(bar - 1, 1):.1f}" '
                f'height="{max(lower - upper, 0.5):.1f}" rx="1.5" fill="{s.color}">'
                f"<title>{escape(tip)}</title></rect>"
            )
        if i % every == 0:
            cx = LEFT + group * (i + 0.5)
            lines = _wrap(label, int(group * every / NARROW_CHAR_WIDTH)) if wrapped else [label]
            spans = "".join(
                f'<tspan x="{cx:.1f}" dy="{0 if k == 0 else 13}">{escape(part)}</tspan>'
                for k, part in enumerate(lines)
            )
            body.append(
                f'<text class="axis" x="{cx:.1f}" y="{height - bottom + 16}" '
                f'text-anchor="middle">{spans}</text>'
            )
    body.append(
        f'<line class="baseline" x1="{LEFT}" x2="{width - RIGHT}" y1="{y(0):.1f}" y2="{y(0):.1f}"/>'
    )
    if len(series) > 1:
        body += _legend(series, width)
    return _svg(width, height, body, title)


def bins(counts: Counter[float], max_bins: int = MAX_BINS) -> tuple[list[str], list[float]]:
    """Histogram labels and heights: one bar per integer over a short integer range, else
    bins of a round width (1, 2, 2.5 or 5 times a power of ten) labelled by their lower edge."""
    if not counts:
        return [], []
    lo, hi = min(counts), max(counts)
    if all(float(v).is_integer() for v in counts) and hi - lo < max_bins:
        start = int(lo)
        return (
            [str(start + i) for i in range(int(hi - lo) + 1)],
            [float(counts.get(start + i, 0)) for i in range(int(hi - lo) + 1)],
        )
    ticks = nice_ticks(lo, hi, max_bins)
    step = ticks[1] - ticks[0]
    first = ticks[0]
    count = max(1, math.floor((hi - first) / step) + 1)
    heights = [0.0] * count
    for value, n in counts.items():
        heights[min(int((value - first) / step), count - 1)] += n
    return [number(first + step * i) for i in range(count)], heights


def histogram(counts: Counter[float], *, title: str, color: str) -> str:
    labels, heights = bins(counts)
    return columns(labels, [Series("traces", heights, color)], title=title)


def _wrap(label: str, width: int) -> list[str]:
    """A label on at most two lines, broken after a hyphen, slash or space near the middle."""
    breaks = [i + 1 for i, c in enumerate(label) if c in "-/ :"]
    if not breaks:
        return [_short(label, width)]
    at = min(breaks, key=lambda i: abs(i - len(label) / 2))
    return [_short(label[:at].strip(), width), _short(label[at:].strip(), width)]


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def hbars(
    rows: Sequence[tuple[str, float, str]],
    *,
    title: str,
    color: str,
    colors: Sequence[str] | None = None,
    high: float | None = None,
    fmt: Format = number,
    width: int = WIDTH,
) -> str:
    """One horizontal bar per ``(label, value, tooltip)`` row, value printed at its end;
    ``colors`` gives each row its own colour."""
    left = 16 + 7.0 * min(LABEL_CHARS, max((len(r[0]) for r in rows), default=4))
    right = 56
    top = 6
    height = top + ROW * len(rows) + 6
    high = high or max((r[1] for r in rows), default=1.0) or 1.0
    plot_w = width - left - right
    body = []
    for i, (label, value, tip) in enumerate(rows):
        y0 = top + ROW * i
        w = plot_w * value / high
        body.append(
            f'<text class="label" x="{left - 8:.1f}" y="{y0 + 15}" text-anchor="end">'
            f"<title>{escape(label)}</title>{escape(_short(label, LABEL_CHARS))}</text>"
        )
        body.append(
            f'<rect class="track" x="{left:.1f}" y="{y0 + 3}" width="{plot_w:.1f}" '
            f'height="{ROW - 6}" rx="3"/>'
        )
        body.append(
            f'<rect x="{left:.1f}" y="{y0 + 3}" width="{max(w, 0.5):.1f}" height="{ROW - 6}" '
            f'rx="3" fill="{colors[i] if colors else color}"><title>{escape(tip)}</title></rect>'
        )
        body.append(
            f'<text class="value" x="{left + plot_w + 6:.1f}" y="{y0 + 15}">'
            f"{escape(fmt(value))}</text>"
        )
    return _svg(width, height, body, title, fixed=True)
