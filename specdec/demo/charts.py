"""The Generate view's three charts as small inline SVG (pure functions, no gradio, no torch).

Why not gradio's native plots: each update of a ``gr.BarPlot``/``gr.LinePlot`` re-embeds a Vega
view in the browser, 40-60 ms of main-thread work per plot on a quiet machine, and gradio
snapshots every plot's data on every streamed message; three of them made every plot refresh of a
512-token run a long task of 130-230 ms (docs/demo.md has the measurement). These charts are a
few dozen SVG elements whatever the run's length, so they are redrawn with every update and stay
live while a run streams.

Contract (each returns one ``<figure class="sd-chart" data-chart=NAME>`` with a caption, an
``<svg>`` and a legend; the numbers come from demo_stats' frames, so the charts count what the
tested statistics count):
- ``steps_svg(t)``: per step, drafted tokens stacked as accepted / rejected / untested, for the
  last ``STEP_WINDOW`` steps (the caption says when earlier steps are left out).
- ``alpha_svg(t)``: the running acceptance rate (accepted / drafted) after each step, y from 0 to 1.
- ``position_svg(stats)``: conditional acceptance per draft depth (accepted / tested), tested depths
  only, each bar labelled with its counts.
- ``charts_html(t)``: the three side by side (they wrap on a narrow screen).
A chart with nothing to show says why instead of drawing empty axes.
"""

from __future__ import annotations

import html

from specdec.core.events import Stats
from specdec.demo import render as R
from specdec.demo import stats as S

W, H = 320, 170  # the SVG's own units; it scales to its column's width
LEFT, RIGHT, TOP, BOTTOM = 30, 8, 8, 22
STEP_WINDOW = 48
BOX = 'class="sd-chart-box" style="flex:1 1 240px;min-width:0;max-width:560px"'
EMPTY = "nothing drafted yet: the baseline (none) drafts nothing, so there is nothing to count"


def _f(x: float) -> str:
    return f"{x:.1f}"


def _figure(name: str, title: str, body: str, legend: str = "") -> str:
    return (
        f'<figure class="sd-chart" data-chart="{name}" style="margin:0">'
        f'<figcaption style="font-size:13px;font-weight:600;margin:0 0 2px">{html.escape(title)}</figcaption>'
        f"{body}{legend}</figure>"
    )


def _svg(inner: str, label: str) -> str:
    return (
        f'<svg viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="{html.escape(label)}" '
        f'style="display:block;max-height:210px;font:10px ui-sans-serif,system-ui,sans-serif">{inner}</svg>'
    )


def _empty(text: str) -> str:
    return f'<p class="sd-chart-empty" style="font-size:12px;opacity:.7;margin:8px 0;min-height:60px">{text}</p>'


def _legend(items: dict[str, str]) -> str:
    keys = "".join(
        f'<span style="margin-right:10px"><span style="display:inline-block;width:9px;height:9px;'
        f'background:{c};margin-right:3px"></span>{html.escape(k)}</span>'
        for k, c in items.items()
    )
    return f'<div class="sd-chart-legend" style="font-size:11px;opacity:.85">{keys}</div>'


def _y_axis(top: float, ticks: list[float], fmt: str) -> str:
    """Grid lines and labels for values 0..top."""
    ph = H - TOP - BOTTOM
    out = []
    for v in ticks:
        y = TOP + ph * (1 - v / top)
        out.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{_f(y)}" y2="{_f(y)}" stroke="#e5e7eb"/>'
            f'<text x="{LEFT - 4}" y="{_f(y + 3)}" text-anchor="end" fill="#6b7280">{format(v, fmt)}</text>'
        )
    return "".join(out)


def _x_label(x: float, text: str) -> str:
    return f'<text x="{_f(x)}" y="{H - 8}" text-anchor="middle" fill="#6b7280">{html.escape(text)}</text>'


def steps_svg(t: R.Transcript) -> str:
    steps = t.steps[-STEP_WINDOW:]
    if not any(s.drafted for s in t.steps):
        return _figure("steps", "drafted tokens per step", _empty(EMPTY))
    top = max(1, max(s.drafted for s in steps))
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    slot = pw / max(len(steps), 1)
    bars = []
    for i, s in enumerate(steps):
        x, y0 = LEFT + i * slot, TOP + ph
        for name, n in zip(S.SERIES, (s.accepted, s.rejected, s.drafted - s.accepted - s.rejected)):
            if n <= 0:
                continue
            h = ph * n / top
            y0 -= h
            bars.append(
                f'<rect x="{_f(x + slot * 0.1)}" y="{_f(y0)}" width="{_f(slot * 0.8)}" height="{_f(h)}" '
                f'fill="{S.SERIES_COLOURS[name]}" data-step="{s.step}" data-series="{name}" data-n="{n}"/>'
            )
    ticks = sorted({0, top // 2, top}) if top > 1 else [0, 1]
    labels = _x_label(LEFT + slot / 2, f"step {steps[0].step}") + _x_label(W - RIGHT - slot / 2, str(steps[-1].step))
    title = "drafted tokens per step" + (
        f" (last {len(steps)} of {len(t.steps)} steps)" if len(t.steps) > len(steps) else ""
    )
    body = _svg(_y_axis(top, ticks, "d") + "".join(bars) + labels, title)
    return _figure("steps", title, body, _legend(S.SERIES_COLOURS))


def alpha_svg(t: R.Transcript) -> str:
    frame = R.alpha_frame(t)
    title = "running alpha (accepted / drafted)"
    if frame.empty:
        return _figure("alpha", title, _empty(EMPTY))
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    first, last = int(frame.step.iloc[0]), int(frame.step.iloc[-1])
    span = max(last - first, 1)
    pts = " ".join(
        f"{_f(LEFT + pw * (s - first) / span)},{_f(TOP + ph * (1 - a))}" for s, a in zip(frame.step, frame.alpha)
    )
    end = frame.alpha.iloc[-1]
    line = (
        f'<polyline points="{pts}" fill="none" stroke="{S.ALPHA_COLOURS["alpha"]}" stroke-width="2" '
        f'data-last="{end:.4f}" data-points="{len(frame)}"/>'
    )
    labels = _x_label(LEFT + 12, f"step {first}") + _x_label(W - RIGHT - 8, str(last))
    body = _svg(_y_axis(1.0, [0.0, 0.5, 1.0], ".1f") + line + labels, title)
    return _figure("alpha", title, body, _legend({f"alpha now {end:.2f}": S.ALPHA_COLOURS["alpha"]}))


def position_svg(stats: Stats | None) -> str:
    frame = S.position_frame(stats)
    title = "conditional alpha_i (accepted / tested), by draft position"
    if frame.empty:
        return _figure("position", title, _empty("no draft token tested yet: the bars fill in as a method drafts"))
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    slot = pw / len(frame)
    bars = []
    for i, row in enumerate(frame.itertuples()):
        x, h, depth = LEFT + i * slot, ph * row.alpha_i, row.position.strip()
        bars.append(
            f'<rect x="{_f(x + slot * 0.15)}" y="{_f(TOP + ph - h)}" width="{_f(slot * 0.7)}" height="{_f(h)}" '
            f'fill="{S.ALPHA_COLOURS["alpha_i"]}" data-depth="{depth}" data-accepted="{row.accepted}" '
            f'data-tested="{row.tested}"><title>depth {depth}: {row.accepted}/{row.tested}</title></rect>'
            f'<text x="{_f(x + slot / 2)}" y="{_f(max(TOP + 8, TOP + ph - h - 3))}" text-anchor="middle" '
            f'fill="#374151">{row.accepted}/{row.tested}</text>' + _x_label(x + slot / 2, row.position.strip())
        )
    body = _svg(_y_axis(1.0, [0.0, 0.5, 1.0], ".1f") + "".join(bars), title)
    return _figure("position", title, body, '<div style="font-size:11px;opacity:.85">x: draft depth</div>')


def charts_html(t: R.Transcript) -> str:
    return (
        '<div class="sd-charts" style="display:flex;flex-wrap:wrap;gap:14px">'
        f'<div id="sd-accept-plot" {BOX}>{steps_svg(t)}</div>'
        f'<div id="sd-alpha-plot" {BOX}>{alpha_svg(t)}</div>'
        f'<div id="sd-position-plot" {BOX}>{position_svg(t.stats)}</div></div>'
    )
