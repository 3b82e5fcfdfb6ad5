"""The Teach view's computations and figures: the speedup model and rejection sampling by Monte Carlo.

Contract:
- ``theory_figure(alpha, k, c, runs)`` is a plotly figure of specdec/core/theory.py's
  E[tokens per target forward] = (1 - alpha^(k+1)) / (1 - alpha) and walltime factor
  (1 - alpha^(k+1)) / ((1 - alpha)(k c + 1)) against alpha, with this session's measured runs
  (RunRecord) overlaid as points. alpha = accepted / tested (the probability a tested draft token
  is accepted, Leviathan et al.'s alpha): the runs are placed by ``Stats.alpha_tested``, not by the
  Generate view's acceptance rate accepted / drafted, which is smaller. ``theory_text`` states the
  numbers at the sliders' values, the best k there (``optimal_k``, the rule auto k uses: k = 0,
  plain decoding, when no k beats it, and then the text says that nothing pays) and that the
  walltime factor takes r = 1 (verifying k + 1 tokens as cheap as one), which a CPU does not give.
- ``parse_weights(text, V)`` turns "5, 3, 1, 1" into a probability vector or raises ConfigError.
- ``monte_carlo(p, q, n, seed, checkpoints)`` draws x ~ q and runs the REAL verifier
  (specdec.core.verify.verify on an specdec.core.tree.Draft chain of one token with its q row) n times,
  yielding a snapshot ``McState`` (counts of the emitted token, acceptances) at each checkpoint, so the
  page can show the histogram converging to p.
- ``mc_figure(state, p, q)`` is the histogram split into its accepted part (tends to min(p, q)) and
  its residual part (tends to max(p - q, 0)), stacked so their sum visibly meets p, with p's 95%
  sampling band 1.96 sqrt(p(1 - p)/n) (the 1/sqrt(n) noise), beside q; and total variation against n.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdec.core.config import ConfigError
from specdec.core.theory import expected_tokens, optimal_k, speedup
from specdec.demo.runs import RunRecord

MAX_VOCAB = 12
PROOF_MD = r"""
**Why the output is distributed exactly as p** (one draft token x ~ q, vocabulary of V tokens):

1. Accept x with probability min(1, p(x) / q(x)). The chance of emitting y *by acceptance* is
   q(y) · min(1, p(y)/q(y)) = **min(p, q)(y)**.
2. Otherwise sample from the residual r = max(p - q, 0) / Σ max(p - q, 0). Rejection happens with
   probability 1 - Σ min(p, q) = **Σ max(p - q, 0)**, exactly the normaliser of r, so the chance of
   emitting y *by rejection* is **max(p - q, 0)(y)**.
3. Add them: min(p, q)(y) + max(p - q, 0)(y) = **p(y)** for every y. ∎

The acceptance rate is Σ min(p, q) = 1 - TV(p, q), so a rejection happens with probability exactly
TV(p, q): the closer the draft is to the target, the more tokens are accepted, yet the output
distribution never depends on q. No exact rule that checks one drafted token can accept more often
than Σ min(p, q) (at each token, P(draft = output = t) ≤ min(p(t), q(t))); verifying a whole block
of drafted tokens jointly can: block verification (Sun et al.) is optimal in the expected number of
tokens per step, so on average never worse than token by token (not on every draft). q must be the
distribution the draft really sampled from. These are Leviathan et al.'s letters; Chen et al. call the target q and the
draft p. The histogram on the right is drawn through the project's real verifier
(`specdec/core/verify.py`), the same code that checks every draft in the Generate view. The full
derivation, chains of k tokens and trees, and why Medusa's typical acceptance is not exact, are in
the two sections below this view (docs/theory-lossless.md and the index of every theory page).
"""


def best_k_words(alpha: float, c: float, k_max: int = 16) -> str:
    """The sentence on the best k: ``optimal_k``'s k, or that no k pays (auto k then decodes plainly)."""
    k, s = optimal_k(alpha, c, k_max)
    if k == 0:
        return (
            f"**No k pays** at this alpha and c: every k up to {k_max} is slower than plain decoding "
            f"(some k pays only when alpha > c), so auto k chooses k = 0, a plain step."
        )
    return f"The best k for this alpha and c is **{k}** ({s:.2f}x)."


def theory_text(alpha: float, k: int, c: float) -> str:
    e = expected_tokens(alpha, k)
    s = speedup(alpha, k, c)
    return (
        f"At alpha = {alpha:.2f} (alpha = accepted / tested: the probability a tested draft token is "
        f"accepted), k = {k}, c = {c:.2f}: **{e:.2f} tokens per target forward**, "
        f"walltime factor **{s:.2f}x** (k c + 1 = {k * c + 1:.2f} forwards' worth of time per step). "
        f"{best_k_words(alpha, c)} This takes r = 1: verifying "
        f"k + 1 tokens costs one 1-token forward, as on a GPU with a small batch. On a CPU, or in a "
        f"large batch, r > 1 and grows with k, which lowers the speedup (docs/theory-speedup.md)."
    )


def _grid(n: int = 101) -> list[float]:
    return [i / (n - 1) for i in range(n)]


def theory_figure(alpha: float, k: int, c: float, runs: list[RunRecord]) -> go.Figure:
    xs = _grid()
    # short, two-line titles: on a phone each half of the figure is ~140 px wide (issue 52, item 4)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("tau: tokens per<br>target forward", "walltime<br>speedup"))
    fig.add_trace(
        go.Scatter(
            x=xs, y=[expected_tokens(a, k) for a in xs], mode="lines", name=f"theory, k={k}", line={"color": "#2563eb"}
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[speedup(a, k, c) for a in xs],
            mode="lines",
            name=f"theory, k={k}, c={c:.2f}",
            line={"color": "#16a34a"},
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=[alpha],
            y=[expected_tokens(alpha, k)],
            mode="markers",
            name="sliders",
            marker={"size": 11, "color": "#2563eb", "symbol": "x"},
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=[alpha],
            y=[speedup(alpha, k, c)],
            mode="markers",
            name="sliders",
            marker={"size": 11, "color": "#16a34a", "symbol": "x"},
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888", row=1, col=2)
    measured = [r for r in runs if r.alpha is not None]
    if measured:
        fig.add_trace(
            go.Scatter(
                x=[r.alpha for r in measured],
                y=[r.tau for r in measured],
                mode="markers",
                name="your runs (tau)",
                marker={"size": 9, "color": "#f97316"},
                text=[f"{r.method}, k={r.k}" for r in measured],
            ),
            row=1,
            col=1,
        )
    raced = [r for r in measured if r.speedup is not None]
    if raced:
        fig.add_trace(
            go.Scatter(
                x=[r.alpha for r in raced],
                y=[r.speedup for r in raced],
                mode="markers",
                name="your races (speedup)",
                marker={"size": 9, "color": "#dc2626", "symbol": "diamond"},
                text=[
                    f"{r.method}, k={r.k}, c~{r.c:.2f}" if r.c is not None else f"{r.method}, k={r.k}" for r in raced
                ],
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text="alpha", range=[0, 1])  # alpha = accepted / tested, said above the plot
    fig.update_annotations(font_size=13)
    fig.update_layout(height=400, margin={"l": 40, "r": 10, "t": 56, "b": 40}, legend={"orientation": "h", "y": -0.25})
    return fig


def parse_weights(text: str, name: str) -> list[float]:
    try:
        ws = [float(t) for t in str(text).replace(";", ",").split(",") if t.strip()]
    except ValueError:
        raise ConfigError(f"{name}: give comma-separated non-negative numbers, e.g. 5, 3, 1, 1") from None
    if not 2 <= len(ws) <= MAX_VOCAB:
        raise ConfigError(f"{name}: give between 2 and {MAX_VOCAB} weights (one per vocabulary token), got {len(ws)}")
    if any(w < 0 or w != w or w == float("inf") for w in ws) or sum(ws) <= 0:
        raise ConfigError(f"{name}: weights must be finite, non-negative and not all zero")
    total = sum(ws)
    return [w / total for w in ws]


def tv(a: list[float], b: list[float]) -> float:
    return 0.5 * sum(abs(x - y) for x, y in zip(a, b))


@dataclass
class McState:
    n: int = 0
    accepted: int = 0
    counts: list[int] = field(default_factory=list)
    curve: list[tuple[int, float]] = field(default_factory=list)  # (n, TV(empirical, p))
    by_accept: list[int] = field(default_factory=list)  # emitted by acceptance (the rest: from the residual)

    def split(self) -> tuple[list[float], list[float]]:
        """(accepted part, residual part) of the empirical distribution: they tend to min(p, q)
        and max(p - q, 0), and add up to the empirical distribution."""
        if not self.n:
            return [0.0] * len(self.counts), [0.0] * len(self.counts)
        acc = [a / self.n for a in self.by_accept]
        return acc, [(c - a) / self.n for c, a in zip(self.counts, self.by_accept)]

    def empirical(self) -> list[float]:
        return [c / self.n for c in self.counts] if self.n else [0.0] * len(self.counts)


def checkpoints(n: int) -> list[int]:
    marks = [m for m in (10, 30, 100, 300, 1000, 3000, 10000, 30000) if m < n]
    return marks + [n]


def monte_carlo(p: list[float], q: list[float], n: int, seed: int) -> Iterator[McState]:
    import torch

    from specdec.core.tree import Draft
    from specdec.core.verify import verify

    if len(p) != len(q):
        raise ConfigError(f"p has {len(p)} weights but q has {len(q)}: they share one vocabulary")
    pt, qt = torch.tensor(p, dtype=torch.float32), torch.tensor(q, dtype=torch.float32)
    rows = torch.stack([pt, pt])  # row 0: p at the root; row 1: p after the draft token (bonus)
    gen = torch.Generator().manual_seed(int(seed))
    state = McState(counts=[0] * len(p), by_accept=[0] * len(p))
    marks = checkpoints(n)
    xs = torch.multinomial(qt, n, replacement=True, generator=gen).tolist()
    for i, x in enumerate(xs, 1):
        verdict = verify(Draft.chain([x], qt[None, :]), rows, gen)
        y = x if verdict.path else verdict.token  # the first emitted token
        state.counts[y] += 1
        state.accepted += bool(verdict.path)
        state.by_accept[y] += bool(verdict.path)
        state.n = i
        if i == marks[0]:
            marks.pop(0)
            state.curve.append((i, tv(state.empirical(), p)))
            yield McState(state.n, state.accepted, list(state.counts), list(state.curve), list(state.by_accept))


def mc_figure(state: McState, p: list[float], q: list[float]) -> go.Figure:
    names = [f"t{i}" for i in range(len(p))]
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.6, 0.4],
        subplot_titles=(f"emitted tokens<br>after {state.n} draws", "distance<br>to p"),
    )
    acc, res = state.split()
    band = [1.96 * (pi * (1 - pi) / state.n) ** 0.5 if state.n else 0.0 for pi in p]  # 95% band of 1/sqrt(n)
    fig.add_trace(
        go.Bar(x=names, y=acc, name="emitted by acceptance ~ min(p, q)", marker_color="#16a34a"), row=1, col=1
    )
    fig.add_trace(
        go.Bar(x=names, y=res, name="emitted from the residual ~ max(p - q, 0)", marker_color="#f59e0b"), row=1, col=1
    )
    fig.add_trace(
        go.Scatter(
            x=names,
            y=p,
            mode="markers",
            name="target p ± 1.96 sqrt(p(1-p)/n)",
            marker={"color": "#111827", "symbol": "line-ew-open", "size": 28, "line": {"width": 3}},
            error_y={"type": "data", "array": band, "visible": True, "color": "#111827"},
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=names, y=q, mode="markers", name="draft q", marker={"color": "#9ca3af", "size": 9}),
        row=1,
        col=1,
    )
    if state.curve:
        fig.add_trace(
            go.Scatter(
                x=[n for n, _ in state.curve],
                y=[d for _, d in state.curve],
                mode="lines+markers",
                name="TV(output, p)",
                line={"color": "#2563eb"},
            ),
            row=1,
            col=2,
        )
        fig.add_trace(
            go.Scatter(
                x=[state.curve[0][0], state.curve[-1][0]],
                y=[tv(q, p)] * 2,
                mode="lines",
                name="TV(q, p): draft alone",
                line={"color": "#9ca3af", "dash": "dash"},
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(type="log", title_text="draws n", row=1, col=2)
    fig.update_yaxes(title_text="probability", row=1, col=1)
    fig.update_annotations(font_size=13)
    fig.update_layout(
        barmode="stack",
        height=380,
        margin={"l": 40, "r": 10, "t": 56, "b": 40},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def mc_text(state: McState, p: list[float], q: list[float]) -> str:
    rate = state.accepted / state.n if state.n else 0.0
    expect = sum(min(a, b) for a, b in zip(p, q))
    return (
        f"{state.n} draws through the verifier: acceptance rate **{rate:.3f}** (theory Σ min(p, q) = "
        f"{expect:.3f}); total variation to p **{tv(state.empirical(), p):.4f}** (sampling noise shrinks like "
        f"1/√n), while the draft alone would be {tv(q, p):.3f} away."
    )
