"""The Generate view's statistics, counted so a class is not misled (pure functions, no gradio, no torch).

Contract:
- ``step_frame(t)``: per step, the drafted tokens split into accepted, rejected (tested and refused:
  the struck tokens in the stream) and untested (drafted after a rejection, never looked at), so the
  bars add up to the draft size and "rejected" matches the stream.
- ``position_frame(stats)``: *conditional* acceptance per draft position, accepted / tested at depth
  i, only for depths the verifier reached, with the counts in its tooltip; ``position_counts``
  writes them beside the plot ("depth 2: 7/9 = 0.78"). Plain alpha_i
  (accepted / drafted) falls to 0 at depths that were drafted but never tested, which reads as
  "the draft is always wrong there" when nothing was checked at all.
- ``method_note(method, k, confidence, t)``: what k means for this method, what ``auto`` chose in
  this run (the draft sizes seen), and why a speculative run shows plain tokens (the draft model's
  confidence stop, no n-gram match, the length limit).
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from specdec.core.events import Stats
from specdec.core.methods import METHODS
from specdec.demo.render import Transcript
from specdec.demo.wording import plural, range_text

SERIES = ("accepted", "rejected", "untested")
SERIES_COLOURS = {"accepted": "#16a34a", "rejected": "#dc2626", "untested": "#cbd5e1"}
ALPHA_COLOURS = {"alpha": "#7c3aed", "alpha_i": "#7c3aed"}  # not orange: orange is "recovered" in the stream


def step_frame(t: Transcript) -> pd.DataFrame:
    """Rows (step, tokens, series) for the per-step stacked bars; every series is always present
    (the plot's colour legend is fixed by the first value it sees)."""
    rows = []
    for s in t.steps:
        untested = s.drafted - s.accepted - s.rejected
        for name, n in zip(SERIES, (s.accepted, s.rejected, untested)):
            rows.append({"step": s.step, "tokens": n, "series": name})
    if not rows:
        rows = [{"step": 1, "tokens": 0, "series": name} for name in SERIES]
    return pd.DataFrame(rows)


def position_label(i: int) -> str:
    return f"{i:>2}"  # the padding keeps depth 10 after depth 9 (the axis sorts labels as text)


def position_frame(stats: Stats | None) -> pd.DataFrame:
    """Conditional acceptance accepted / tested per depth, tested depths only."""
    rows: list[dict[str, Any]] = []
    if stats is not None:
        for i, (a, n) in enumerate(zip(stats.accepted_at, stats.tested_at), 1):
            if n:
                rows.append(
                    {"position": position_label(i), "alpha_i": a / n, "accepted": a, "tested": n, "series": "alpha_i"}
                )
    return pd.DataFrame(rows, columns=["position", "alpha_i", "accepted", "tested", "series"])


def position_counts(stats: Stats | None) -> str:
    """The counts behind the conditional acceptance plot, as one line of HTML."""
    if stats is None or not any(stats.tested_at):
        return (
            '<p class="sd-counts" style="font-size:12px;opacity:.75;margin:2px 0">No draft token tested yet: '
            "the plots fill in as a speculative method runs (the baseline drafts nothing).</p>"
        )
    parts = [
        f"depth {i}: {a}/{n} = {a / n:.2f}" for i, (a, n) in enumerate(zip(stats.accepted_at, stats.tested_at), 1) if n
    ]
    return (
        '<p class="sd-counts" style="font-size:12px;opacity:.85;margin:2px 0">Conditional acceptance, '
        f"accepted / tested: {html.escape('; '.join(parts))}</p>"
    )


def _sizes(t: Transcript) -> str:
    sizes = [s.drafted for s in t.steps]
    if not sizes:
        return ""
    plain = sum(1 for n in sizes if n == 0)
    return (
        f" This run: {range_text(min(sizes), max(sizes))} drafted per step (last step {sizes[-1]}); "
        f"{plain} of {plural(len(sizes), 'step')} drafted nothing (plain tokens)."
    )


def method_note(method: str, k: Any, confidence: float, t: Transcript) -> str:
    """One short paragraph (HTML) under the live numbers."""
    m = METHODS.get(method)
    if m is None:
        return ""
    if m.drafts == "nothing":
        text = "none: nothing is drafted, k is ignored; every token is plain (one target forward each)."
    else:
        text = f"{method}: k = {m.k_means}; this request: k = {k}."
        if m.adaptive and k == "auto":
            text += (
                " auto picks each step's length from measured timings, so two identical seeded runs "
                "may take different numbers of steps (the tokens are the same)."
            )
        if method == "draft" and confidence > 0:
            text += (
                f" The draft also stops early where its own top probability is below {confidence:g}"
                " (its confidence); a step where it stops at once drafts nothing and shows a plain token."
            )
        elif method == "lookup":
            text += " A plain token means no n-gram of the context matched: nothing to copy"
            text += " (with k = auto, also that copying was measured not to pay)." if k == "auto" else "."
        if m.tree:
            text += (
                " Position = depth in the tree; rejected siblings are struck; the bars count every node "
                "drafted, most of them untested alternatives."
            )
        text += _sizes(t)
    return f'<p class="sd-method-note" style="font-size:13px;opacity:.85;margin:6px 0 0">{html.escape(text)}</p>'
