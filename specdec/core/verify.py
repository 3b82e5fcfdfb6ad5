"""One verifier for every draft: chains and trees, stochastic (with q) or deterministic (q=None).

Notation as in Leviathan et al. (2023, Algorithm 1): p is the target distribution, q the draft
distribution, k the number of drafted tokens, x a drafted token. Chen et al. (2023, Algorithm 2)
swap the letters: their q is the target and p the draft (accept with min(1, q/p), resample from
(q - p)+); the algorithm is the same.

Contract
--------
``verify(draft, p, generator) -> Verdict`` where ``p`` is float32 ``[n+1, V]``: target
probabilities from the single target forward, already through ``to_probs`` with the same
parameters as q. Row 0 is the distribution after the pending token, row ``i+1`` the one after
node ``i``. The walk starts at the root with residual ``r = p[0]``; for each child c of the current
node, in proposal order, with ``q_c = draft.q[c]`` (one-hot at x_c when ``draft.q is None``):

- accept c with probability ``min(1, r(x_c) / q_c(x_c))``; then move to c with ``r = p[c+1]``;
- otherwise set ``r = norm(max(r - q_c, 0))`` and try the next sibling.

When no child is accepted, or a leaf is reached, one more token is sampled from r. The emitted
tokens are ``[tokens[i] for i in verdict.path] + [verdict.token]``: at least one token per step.

- A chain with q is Algorithm 1 of Leviathan et al. (modified rejection sampling), including the
  extra token sampled from the last row when every draft token is accepted.
- ``q=None`` is the deterministic case (prompt lookup; Medusa / EAGLE candidate trees): q is a
  point mass, so x_c is accepted with probability r(x_c) and the residual is r with x_c removed.
- Why it is exact: for one candidate x ~ q_c the chance of emitting token y by acceptance is
  min(r, q_c)(y), and the rejection branch has mass sum(max(r - q_c, 0)), which is exactly what the
  normalised residual hands on; so "accept, or continue with the residual" is distributed as r.
  By induction over siblings and down the tree, the emitted tokens are distributed exactly as
  sampling from p one token at a time (each sibling drawn independently from its q_c given the
  context, or fixed independently of the verifier's randomness).

- The rejection probability of one candidate is TV(r, q_c), and no exact single-candidate rule can
  accept more often than sum(min(r, q_c)) (maximal coupling; docs/theory-lossless.md, section 6).

Greedy decoding (temperature 0) is this same path: with one-hot p and q every ratio is 0 or >= 1,
no uniform is drawn, and ``sample`` returns the argmax of a one-hot row, so the generator is never
advanced. Greedy output equals plain decoding's exactly as long as the (k+1)-row scoring forward
rounds the logits to the same argmax as 1-row forwards would (tested in float32 on the shipped
models; not guaranteed for near-ties in lower precision).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from specdec.core.sampling import sample
from specdec.core.tree import Draft

__all__ = ["Check", "Verdict", "verify", "residual"]

# (node index, r(x) when tested, q(x), accepted?)
Test = tuple[int, float, float, bool]
RESIDUAL_TOP = 5  # tokens of a residual kept in the verifier's record


@dataclass(frozen=True)
class Check:
    """One acceptance test as the verifier made it (only with ``verify(..., record=True)``): the
    node, r(x) and q(x) at the test, the uniform u it drew (None when min(1, r/q) is 0 or 1, so no
    draw was needed), the verdict, and after a rejection the top tokens of the residual
    norm(max(r - q, 0)) it moved on to, as (token id, probability) pairs."""

    node: int
    p: float
    q: float
    u: float | None
    accepted: bool
    residual: tuple[tuple[int, float], ...] = ()

    @property
    def ratio(self) -> float:
        return 1.0 if self.p >= self.q else self.p / self.q


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying one draft.

    path:     accepted node indices, root-to-leaf order.
    token:    the one extra token emitted after the accepted path.
    bonus:    True iff the path ends at a leaf (a node with no children), so ``token`` was sampled
              from that leaf's untouched target row p[leaf+1].
    tested:   every acceptance test in the order made (accepted and rejected interleaved), as
              (node, r(x), q(x), accepted) with r(x) the target or residual probability of the
              node's token at the moment of its test and q(x) its draft probability (1.0 when q is
              None).
    """

    path: tuple[int, ...]
    token: int
    bonus: bool
    tested: tuple[Test, ...]
    record: tuple[Check, ...] | None = None  # the verifier's record, when asked for
    final_from: tuple[tuple[int, float], ...] = ()  # with record: top tokens of the row ``token`` came from
    draft_pq: tuple[tuple[float, float], ...] = ()  # with record: (p(x), q(x)) of every node, tested or not

    @property
    def kind(self) -> Literal["bonus", "recovered", "plain"]:
        """How ``token`` was made: "bonus" (from p after an accepted leaf), "recovered" (from a
        row after a rejection, or from the row of an accepted node whose children were all
        rejected), or "plain" (the draft was empty: nothing was tested, an ordinary decoding step).
        """
        if self.bonus:
            return "bonus"
        return "recovered" if self.tested else "plain"


def residual(r: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(r - q, 0)): the distribution to draw from after rejecting a candidate x ~ q.

    Zero-mass guard: the mass is 0 only if r <= q everywhere; both are distributions, so then
    r == q and the rejected candidate had acceptance probability min(1, r/q) = 1, i.e. this branch
    has probability zero. It is reached only through floating-point rounding (r a hair below q),
    and r itself is then the correct continuation (the limit as the rounding goes to zero), so r is
    returned unchanged.
    """
    rest = (r - q).clamp_(min=0.0)
    mass = float(rest.sum())
    return rest / mass if mass > 0.0 else r


def _residual_point(r: torch.Tensor, x: int) -> torch.Tensor:
    """residual(r, one_hot(x)) without building the one-hot: r with x removed, renormalised."""
    rest = r.clone()
    rest[x] = 0.0
    mass = float(rest.sum())
    return rest / mass if mass > 0.0 else r


def _accept(r_x: float, q_x: float, generator: torch.Generator | None) -> tuple[bool, float | None]:
    """(True with probability min(1, r_x / q_x), the uniform drawn); draws only when 0 < ratio < 1."""
    if r_x >= q_x:
        return True, None
    if r_x <= 0.0:
        return False, None
    u = float(torch.rand((), dtype=torch.float64, generator=generator))
    return u < r_x / q_x, u


def _top(r: torch.Tensor, n: int = RESIDUAL_TOP) -> tuple[tuple[int, float], ...]:
    vals, ids = torch.topk(r, min(n, r.shape[0]))
    return tuple((int(i), float(v)) for i, v in zip(ids.tolist(), vals.tolist()) if v > 0.0)


def _check_inputs(draft: Draft, p: torch.Tensor, tokens: list[int]) -> None:
    n = draft.n
    if p.dim() != 2 or p.shape[0] != n + 1:
        raise ValueError(f"p must have shape [n+1={n + 1}, V], got {tuple(p.shape)}")
    vocab = p.shape[1]
    if draft.q is not None and draft.q.shape[1] != vocab:
        raise ValueError(f"q has V={draft.q.shape[1]} but p has V={vocab}")
    if tokens and not (0 <= min(tokens) and max(tokens) < vocab):
        raise ValueError(f"draft token ids must lie in [0, {vocab})")


def _probs_at_tokens(draft: Draft, p: torch.Tensor) -> tuple[list[float], list[float]]:
    """p_at[c] = p[parent(c)+1, x_c] (r(x_c) while r is untouched) and q_at[c] = q_c(x_c).

    Gathered once so a chain needs no per-token tensor reads.
    """
    rows = torch.tensor([parent + 1 for parent in draft.parents], dtype=torch.long)
    p_at = p[rows, draft.tokens].tolist()
    if draft.q is None:
        return p_at, [1.0] * draft.n
    q_at = draft.q.gather(1, draft.tokens[:, None])[:, 0].tolist()
    if min(q_at) <= 0.0:
        bad = q_at.index(min(q_at))
        raise ValueError(f"node {bad}'s token has q(x) = 0: q is not what it was sampled from (I3)")
    return p_at, q_at


def verify(draft: Draft, p: torch.Tensor, generator: torch.Generator | None = None, record: bool = False) -> Verdict:
    """Verify ``draft`` against target rows ``p`` [n+1, V]; see the module docstring. ``record``
    also returns every test as a ``Check`` (the same draws: the outcome does not change)."""
    tokens = draft.tokens.tolist()
    _check_inputs(draft, p, tokens)
    if draft.n == 0:
        return Verdict((), sample(p[0], generator), False, (), () if record else None, _top(p[0]) if record else ())
    p_at, q_at = _probs_at_tokens(draft, p)

    node, r, fresh = -1, p[0], True  # fresh: r is still p[node+1], so r(x_c) == p_at[c]
    path: list[int] = []
    tested: list[Test] = []
    checks: list[Check] = []
    while True:
        children = draft.children(node)
        accepted = None
        for c in children:
            r_x = p_at[c] if fresh else float(r[tokens[c]])
            ok, u = _accept(r_x, q_at[c], generator)
            tested.append((c, r_x, q_at[c], ok))
            if ok:
                accepted = c
                if record:
                    checks.append(Check(c, r_x, q_at[c], u, True))
                break
            r = _residual_point(r, tokens[c]) if draft.q is None else residual(r, draft.q[c])
            fresh = False
            if record:
                checks.append(Check(c, r_x, q_at[c], u, False, _top(r)))
        if accepted is None:
            break
        path.append(accepted)
        node, r, fresh = accepted, p[accepted + 1], True

    bonus = not children  # the walk stopped at a leaf reached by acceptance (path is non-empty)
    if record:
        pq = tuple(zip(p_at, q_at))
        return Verdict(tuple(path), sample(r, generator), bonus, tuple(tested), tuple(checks), _top(r), pq)
    return Verdict(tuple(path), sample(r, generator), bonus, tuple(tested))
