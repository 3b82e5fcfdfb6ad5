"""The memory-wall figure: tokens/s per prompt category against the weights' bandwidth limit.

Contract: ``memwall_chart(result)`` draws a ``specdec bench`` result as a self-contained SVG string:
a grouped bar chart, one group per category (``config.categories``, else the categories of our
``none``), with one bar per row present among: our ``none``, our best speculative row of that
category (lookup, draft, medusa or eagle, named above its bar), transformers' ``hf_greedy``,
llama.cpp's plain ``llamacpp`` and its best speculative row (``llamacpp-*``). Rows missing from the
result are left out. ``memwall.limit_tok_s`` (when the result has it) is a horizontal line labelled
with the weights' format, bytes per step and bandwidth. Pure: no torch, no I/O.

Why: a plain decoding step reads every weight once, so bytes per step over memory bandwidth bounds
plain tokens/s; the figure shows, per workload, how far each system sits below that wall and how
much speculation lifts us past what plain decoding can reach. Markup the tests read: each group is
``<g class="category" data-category=C>``, each bar ``<rect class="bar" data-row=LABEL>``, the limit
``<line class="limit">``.
"""

from __future__ import annotations

from html import escape

from specdec.figures.svgplot import nice_ticks

LEFT, RIGHT, TOP, BOTTOM = 64, 24, 40, 72
GROUP_W, H = 104, 460
SPECULATIVE = ("lookup", "draft", "medusa", "eagle")
# (label, colour) per bar kind, in drawing order
KINDS = (
    ("ours none", "#444444"),
    ("ours best speculative", "#2ca02c"),
    ("transformers hf_greedy", "#d62728"),
    ("llama.cpp plain", "#8c564b"),
    ("llama.cpp best speculative", "#e6a35c"),
)


def _tok_s(row: dict | None, cat: str) -> float | None:
    if not row:
        return None
    c = row.get("categories", {}).get(cat)
    return None if c is None else c.get("tokens_per_s")


def _best(rows: dict, names: list[str], cat: str) -> tuple[str, float] | None:
    """The fastest of ``names`` in category ``cat``, as (name, tokens/s); None when none has it."""
    have = [(n, _tok_s(rows.get(n), cat)) for n in names]
    have = [(n, v) for n, v in have if v is not None]
    return max(have, key=lambda p: p[1]) if have else None


def categories(result: dict) -> list[str]:
    cats = list(result.get("config", {}).get("categories") or {})
    return cats or list(result.get("methods", {}).get("none", {}).get("categories", {}))


def bars(result: dict) -> dict[str, list[tuple[str, str, float]]]:
    """Per category, the bars to draw as (kind label, row name, tokens/s), in ``KINDS`` order."""
    ours, hf, lc = result.get("methods", {}), result.get("hf") or {}, result.get("llamacpp") or {}
    lc_spec = [n for n in lc if n != "llamacpp"]
    out = {}
    for cat in categories(result):
        picks = [
            ("none", _tok_s(ours.get("none"), cat)),
            _best(ours, [n for n in SPECULATIVE if n in ours], cat),
            ("hf_greedy", _tok_s(hf.get("hf_greedy"), cat)),
            ("llamacpp", _tok_s(lc.get("llamacpp"), cat)),
            _best(lc, lc_spec, cat),
        ]
        out[cat] = [(k[0], p[0], p[1]) for k, p in zip(KINDS, picks) if p is not None and p[1] is not None]
    return out


def limit_label(memwall: dict) -> str:
    mb = memwall["bytes_per_step"] / 1e6
    return (
        f"bandwidth limit ({memwall['format']} weights, {mb:.0f} MB/step at {memwall['bandwidth_gbs']:.1f} GB/s):"
        f" {memwall['limit_tok_s']:.0f} tok/s"
    )


def memwall_chart(result: dict) -> str:
    groups = bars(result)
    if not any(groups.values()):
        raise ValueError("nothing to plot: no row has per-category tokens/s")
    memwall = result.get("memwall") or {}
    limit = memwall.get("limit_tok_s")
    top = max([v for g in groups.values() for _, _, v in g] + ([limit] if limit else []))
    yt = nice_ticks(0.0, top * 1.04, 6)
    y1 = yt[-1]
    kinds = [k for k in KINDS if any(b[0] == k[0] for g in groups.values() for b in g)]
    colour = dict(kinds)
    pw, ph = GROUP_W * len(groups), H - TOP - BOTTOM
    w = LEFT + pw + RIGHT
    sy = lambda y: TOP + ph - y / y1 * ph
    title = "tokens/s per prompt category against the memory wall"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{H}" viewBox="0 0 {w} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{H}" fill="white"/>',
        f'<text x="{LEFT + pw / 2}" y="22" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    for v in yt:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    out.append(f'<text transform="translate(16,{TOP + ph / 2}) rotate(-90)" text-anchor="middle">tokens/s</text>')
    bw = (GROUP_W - 16) / max(1, len(kinds))
    for i, (cat, group) in enumerate(groups.items()):
        gx = LEFT + i * GROUP_W + 8
        out.append(f'<g class="category" data-category="{escape(cat)}">')
        for kind, name, v in group:
            x = gx + [k[0] for k in kinds].index(kind) * bw
            y = sy(v)
            out.append(
                f'<rect class="bar" data-row="{escape(kind)}" data-name="{escape(name)}" x="{x:.1f}" y="{y:.1f}" '
                f'width="{bw - 2:.1f}" height="{TOP + ph - y:.1f}" fill="{colour[kind]}">'
                f"<title>{escape(cat)}: {escape(name)} {v:.1f} tok/s</title></rect>"
            )
            if "speculative" in kind:  # which row was the best
                cx, ty = x + (bw - 2) / 2, y - 4
                out.append(
                    f'<text transform="translate({cx:.1f},{ty:.1f}) rotate(-90)" font-size="9" '
                    f'fill="#333">{escape(name.removeprefix("llamacpp-"))}</text>'
                )
        cx = gx + (GROUP_W - 16) / 2
        out.append(f'<text x="{cx:.1f}" y="{TOP + ph + 18}" text-anchor="middle">{escape(cat)}</text>')
        out.append("</g>")
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    if limit:
        ly = sy(limit)
        out.append(
            f'<line class="limit" x1="{LEFT}" x2="{LEFT + pw}" y1="{ly:.1f}" y2="{ly:.1f}" stroke="#1f77b4" '
            'stroke-width="2" stroke-dasharray="6,4"/>'
        )
        out.append(f'<text x="{LEFT + 6}" y="{ly - 6:.1f}" fill="#1f77b4">{escape(limit_label(memwall))}</text>')
    lx, ly = LEFT, TOP + ph + 40
    for kind, c in kinds:
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" fill="{c}"/>')
        out.append(f'<text x="{lx + 16}" y="{ly}">{escape(kind)}</text>')
        lx += 30 + 6.5 * len(kind)
        if lx > LEFT + pw - 160:
            lx, ly = LEFT, ly + 20
    out.append("</svg>")
    return "\n".join(out) + "\n"
