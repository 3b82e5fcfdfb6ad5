"""A tiny SVG line-chart writer (pure Python, no dependency) for the plots in docs/.

Contract: ``line_chart(series, title, x_label, y_label)`` returns a complete, self-contained SVG
document as a string. ``series`` is a list of ``Series(label, xs, ys, colour, dash)``, ``dash`` an
SVG dash pattern ("" solid, DASHED, DOTTED); points whose y is None are skipped. The axes start at
the data's bounds rounded outwards to "nice" ticks,
a dotted horizontal line marks ``reference_y`` (e.g. speedup 1.0), and a legend sits top right.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

W, H = 720, 440
LEFT, RIGHT, TOP, BOTTOM = 64, 190, 40, 56


@dataclass(frozen=True)
class Series:
    label: str
    xs: list[float]
    ys: list[float | None]
    colour: str = "#1f77b4"
    dash: str = ""


DASHED, DOTTED = "6,4", "2,3"


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """About n round tick values covering [lo, hi] (steps of 1, 2 or 5 times a power of ten)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    v = start
    while v < hi + step * 0.999:
        ticks.append(round(v, 10))
        v += step
    return ticks


def _fmt(v: float) -> str:
    return f"{v:g}"


def line_chart(series: list[Series], title: str, x_label: str, y_label: str, reference_y: float | None = 1.0) -> str:
    xs = [x for s in series for x, y in zip(s.xs, s.ys) if y is not None]
    ys = [y for s in series for y in s.ys if y is not None] + ([reference_y] if reference_y is not None else [])
    if not xs:
        raise ValueError("nothing to plot: every series is empty")
    xt, yt = nice_ticks(min(xs), max(xs), 8), nice_ticks(min(ys), max(ys), 6)
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    sx = lambda x: LEFT + (x - x0) / (x1 - x0) * pw
    sy = lambda y: TOP + ph - (y - y0) / (y1 - y0) * ph
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{LEFT + pw / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    for v in yt:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    for v in xt:
        out.append(f'<line x1="{sx(v):.1f}" x2="{sx(v):.1f}" y1="{TOP + ph}" y2="{TOP + ph + 4}" stroke="black"/>')
        out.append(f'<text x="{sx(v):.1f}" y="{TOP + ph + 18}" text-anchor="middle">{_fmt(v)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    if reference_y is not None:
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{sy(reference_y):.1f}" y2="{sy(reference_y):.1f}" '
            'stroke="#888" stroke-dasharray="2,3"/>'
        )
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 14}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(
        f'<text transform="translate(16,{TOP + ph / 2}) rotate(-90)" text-anchor="middle">{escape(y_label)}</text>'
    )
    for i, s in enumerate(series):
        pts = [(sx(x), sy(y)) for x, y in zip(s.xs, s.ys) if y is not None]
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{s.colour}" stroke-width="2"{dash}/>')
        for x, y in pts:
            fill = "white" if s.dash else s.colour
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{fill}" stroke="{s.colour}"/>')
        ly = TOP + 12 + 20 * i
        lx = LEFT + pw + 14
        out.append(f'<line x1="{lx}" x2="{lx + 26}" y1="{ly}" y2="{ly}" stroke="{s.colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{lx + 32}" y="{ly + 4}">{escape(s.label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
