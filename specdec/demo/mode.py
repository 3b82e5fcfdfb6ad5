"""The teaching mode: "show me" (a fixed k, drafting on every step) or "fastest" (auto k), and what
the choice cost in the run just made.

Why: auto k rightly runs plain steps where drafting does not pay, so on a real model (SmolLM2 on
prose) a class saw almost no drafted, accepted or rejected token (issue 52, item 1). "Show me"
fixes k (the teacher sets it, default ``SHOW_K``) and turns the draft model's confidence stop off,
so every step drafts (prompt lookup still needs an n-gram match to copy from); the price of that is
said next to the run, from its own timings.

Contract:
- ``MODES``: the radio's (label, value) pairs; ``SHOW``, ``FASTEST`` the values; ``SHOW_K`` the
  default fixed k.
- ``mode_of(k)``: the mode a k setting means ("auto" is fastest, an int is show me);
  ``k_of(mode, k)``: the k setting a mode switch leaves (fastest: "auto"; show me: the fixed k
  shown, or ``SHOW_K``). The page keeps the radio and the k menu in step with these two.
- ``confidence_for(k)``: the draft's confidence stop for a k setting (0 for a fixed k: draft k
  tokens every step; the engine's default for auto).
- ``cost_text(method, k, t, before)``: one sentence on what this run's mode cost: the speed
  against plain decoding, measured from a plain run of this session (``before``: earlier
  ``speed.Split``s) when there is one, else the theory's estimate tau / (1 + d c) from this run's
  own tau, mean draft size d and cost ratio c; and that one run is noisy (the Race repeats).
  ``cost_html`` is it as a paragraph (class ``sd-mode-cost``).
- ``mode_controls(prefix, label)``: the radio (``PREFIX-mode``) and the k menu (``PREFIX-k``), built
  inside the caller's gradio block (gradio is imported there only).
"""

from __future__ import annotations

import html
from typing import Any

from specdec.core.config import K_MAX, GenerateSpec
from specdec.demo import render as R
from specdec.demo import speed as SP

SHOW, FASTEST = "show me", "fastest"
SHOW_K = 4
MODES = [
    (f"{SHOW}: draft k tokens every step (see the mechanism)", SHOW),
    (f"{FASTEST}: auto k, drafts only when it pays", FASTEST),
]
NOISE = "One run is noisy: the Race repeats both sides and gives the spread."


def mode_of(k: Any) -> str:
    return FASTEST if str(k) == "auto" else SHOW


def k_of(mode: str, k: Any) -> str:
    if mode == FASTEST:
        return "auto"
    return str(k) if str(k) != "auto" else str(SHOW_K)


def confidence_for(k: Any) -> float:
    return 0.0 if mode_of(k) == SHOW else GenerateSpec.confidence


def _plain(before: list) -> SP.Split | None:
    return next((b for b in reversed(before) if b is not None and b.method == "none"), None)


def cost_text(method: str, k: Any, t: R.Transcript, before: list = ()) -> str:
    """What this run's mode cost, in two short sentences (empty before a step has run): short,
    because it sits in the live numbers' column, which must stay in a projector's first screen."""
    if not t.steps or t.stats is None:
        return ""
    if method == "none":
        return f"Plain decoding: the speed every method is compared with. {NOISE}"
    mode = mode_of(k)
    head = f"{mode} (k={k})" if mode == SHOW else f"{mode} (auto k)"
    tau = t.stats.tau or 1.0
    drafted = sum(s.drafted for s in t.steps) / len(t.steps)
    now, plain = SP.split(t, SP.label(method, k)), _plain(list(before))
    if now is not None and plain is not None and now.step_ms > 0:
        ratio = tau * plain.step_ms / now.step_ms
        cost = (
            f"~{ratio:.2f}x plain's speed, measured (tau {tau:.2f} x your plain run's {plain.step_ms:.1f} ms "
            f"a step / this run's {now.step_ms:.1f} ms)"
        )
    else:
        c = R.cost_ratio(t)
        if c is None:
            cost = f"tau {tau:.2f}; nothing was drafted, so no draft was paid for"
        else:
            est = tau / (1 + drafted * c)
            cost = (
                f"~{est:.2f}x plain's speed, estimated as tau / (1 + d c) = {tau:.2f} / (1 + {drafted:.1f} x "
                f"{c:.2f}); run none once to measure it"
            )
    why = " Fastest drafts only where it pays." if mode == SHOW else " Show me drafts every step."
    return f"Cost of {head}: {cost}.{why} {NOISE}"


def cost_html(method: str, k: Any, t: R.Transcript, before: list = ()) -> str:
    text = cost_text(method, k, t, before)
    if not text:
        return ""
    return (
        f'<p class="sd-mode-cost" data-mode="{mode_of(k)}" style="font-size:12px;line-height:1.35;margin:4px 0 0;'
        f'padding:2px 6px;border-left:3px solid #7c3aed">{html.escape(text)}</p>'
    )


def mode_controls(prefix: str, label: str = "k (draft tokens a step; tree nodes for medusa, eagle)") -> tuple:
    """The teaching mode's radio and the k menu (specdec/demo/mode.py), kept in step: choosing a
    mode sets k ("auto" or the fixed k), choosing k sets the mode. ``.input`` only, so neither
    update fires the other."""
    import gradio as gr

    mode = gr.Radio(MODES, value=SHOW, label="mode", elem_id=f"{prefix}-mode")
    k = gr.Dropdown(
        ["auto"] + [str(i) for i in range(1, K_MAX + 1)],
        value=str(SHOW_K),
        label=label,
        elem_id=f"{prefix}-k",
        min_width=90,
    )
    mode.input(k_of, [mode, k], [k], queue=False, api_visibility="private", show_progress="hidden")
    k.input(mode_of, [k], [mode], queue=False, api_visibility="private", show_progress="hidden")
    return mode, k
