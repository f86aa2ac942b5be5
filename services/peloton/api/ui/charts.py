"""Server-side SVG line charts for the web UI (no script, no library): pure functions.

`line_chart(series, ...)` draws each series (name, css class, [(x, y), ...]) as a
polyline over shared axes: x is time in ms since the epoch (labelled in UTC), y starts
at 0 and ends at the largest value (at least 1). Every coordinate stays inside the
plot area; the output is a complete, escaped <svg> element.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape

__all__ = ["line_chart", "Series"]

Series = tuple[str, str, Sequence[tuple[float, float]]]

_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 12, 12, 40


def _clock(ms: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000))


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.2f}".rstrip("0")


def line_chart(series: Sequence[Series], *, width: int = 640, height: int = 220,
               title: str = "", unit: str = "") -> str:
    xs = [x for _, _, pts in series for x, _ in pts]
    ys = [y for _, _, pts in series for _, y in pts]
    label = escape(f"{title} ({unit})" if unit else title)
    if not xs:
        return (f'<svg class="chart" role="img" aria-label="{label}" width="{width}" '
                f'height="{height}" viewBox="0 0 {width} {height}"><text x="{width // 2}" '
                f'y="{height // 2}" text-anchor="middle">no entitlement cycles in this '
                f'window</text></svg>')
    x0, x1 = min(xs), max(xs)
    top = max(1.0, max(ys) * 1.05)
    pw, ph = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM

    def px(x: float) -> float:
        return _LEFT + (pw * (x - x0) / (x1 - x0) if x1 > x0 else pw / 2)

    def py(y: float) -> float:
        return _TOP + ph - ph * min(max(y, 0.0), top) / top

    out = [f'<svg class="chart" role="img" aria-label="{label}" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}">',
           f'<title>{label}</title>',
           f'<rect class="plot" x="{_LEFT}" y="{_TOP}" width="{pw}" height="{ph}"/>']
    for i in range(5):
        v = top * i / 4
        y = py(v)
        out.append(f'<line class="grid" x1="{_LEFT}" x2="{_LEFT + pw}" y1="{y:.1f}" '
                   f'y2="{y:.1f}"/><text class="tick" x="{_LEFT - 4}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{escape(_num(v))}</text>')
    for x, anchor in ((x0, "start"), (x1, "end")):
        out.append(f'<text class="tick" x="{px(x):.1f}" y="{_TOP + ph + 16}" '
                   f'text-anchor="{anchor}">{_clock(x)} UTC</text>')
    lx = _LEFT
    for name, css, pts in series:
        if pts:
            coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            out.append(f'<polyline class="line {escape(css)}" points="{coords}">'
                       f'<title>{escape(name)}</title></polyline>')
        out.append(f'<rect class="key {escape(css)}" x="{lx}" y="{height - 12}" width="10" '
                   f'height="10"/><text class="tick" x="{lx + 14}" y="{height - 3}">'
                   f'{escape(name)}</text>')
        lx += 24 + 8 * len(name)
    out.append("</svg>")
    return "".join(out)
