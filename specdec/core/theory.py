"""Closed-form speedup model of speculative decoding (Leviathan et al. 2023, section 3).

Notation (Leviathan et al.'s; Chen et al. 2023 swap the letters): p target, q draft, k draft
length, alpha = E[sum_x min(p(x), q(x))] the per-token acceptance rate, c = cost of one draft
forward / cost of one target forward, r = cost of the target's verification forward over k + 1
tokens / cost of a 1-token target forward (1 in the paper, which assumes the wider forward is
free; measured > 1 on a CPU, and rising with k). The derivations are in docs/theory-speedup.md;
tests/test_theory.py says which formula is checked how (Monte Carlo of the acceptance process,
the real verifier, exact algebra, or the measured sweep).

Contract (all pure functions of floats, no torch):
- ``expected_tokens(alpha, k)`` = E[tokens per target forward] = (1 - alpha^(k+1)) / (1 - alpha),
  i.i.d. acceptance; k may be fractional (a mean draft length), as the bench uses it.
- ``speedup(alpha, k, c, r=1)`` = expected_tokens / (k c + r): the walltime improvement factor.
- ``best_k(alpha, c, k_max, r=1)`` = the k in [1, k_max] that maximises ``speedup`` (ties: the
  smallest); ``optimal_k`` returns it with its speedup, or k = 0 when no k beats plain decoding.
- ``break_even_alpha(c)`` = c: some k pays iff alpha > c, and then k = 1 already does (r = 1).
- ``arithmetic_factor(alpha, k, c_hat)`` = (1 - alpha)(k c_hat + k + 1) / (1 - alpha^(k+1)): how many
  times more arithmetic operations speculation does per emitted token (Leviathan et al., section 3),
  with c_hat the draft-to-target ratio of arithmetic per token.
- Without the i.i.d. assumption, from per-position conditional acceptance rates alpha_i = P(accept
  at depth i | depth i was tested): ``expected_tokens_per_position(alphas)`` = 1 + sum_i prod_{j<=i}
  alpha_j, ``speedup_per_position(alphas, c, r)``, ``best_k_per_position(alphas, c, r)``.
- ``expected_tokens_mixture(draft_sizes, alphas)``: the mean of the per-position formula over steps
  whose draft sizes differ (prompt lookup: 0 when nothing matches, up to k when something does;
  a draft that stops at low confidence). expected_tokens is concave in k, so plugging the mean
  draft length into it overstates tau (Jensen).
- ``neighbour_gap(alpha, k, c, r)`` = g(k) = alpha^(k+1)(k c + r) - c E_k: S(k+1) > S(k) iff
  g(k) > 0, and g(k+1) - g(k) = -(1 - alpha) alpha^(k+1)((k+1) c + r) < 0, so S is unimodal in k.
- A verification cost that grows with k, r(k) = r0 + v k (``verify_cost``; the draft proposer's
  auto-k uses r0 = 1, v = ``verify_cost``; prompt lookup's fits it to measured step times):
  ``fit_verify_cost(ks, rs, ws=None)`` is the (weighted) least-squares (r0, v);
  S(alpha, k, c, r0 + v k) = S(alpha, k, c + v, r0) = S(alpha, k, (c + v)/r0, 1) / r0, so
  ``best_k_linear(alpha, c, r0, v)`` = ``best_k(alpha, c + v, r=r0)`` and only (c + v)/r0 matters.
- ``expected_tokens_tree(parents, accept)`` = 1 + sum over nodes of the product of ``accept`` along
  the node's root path, with accept[v] = P(v accepted | its parent accepted). For deterministic
  candidates verified sibling-wise (specdec/core/verify.py) accept[v] = p_parent(x_v), and a chain gives
  ``expected_tokens_per_position``.
- ``batch_verify_ratio(batch, k, t0, t1)`` = r for ``batch`` requests when a forward over n rows
  costs t0 + t1 n: (t0 + t1 batch (k + 1)) / (t0 + t1 batch); 1 while the fixed cost dominates, k + 1
  once the rows do (a large serving batch).
"""

from __future__ import annotations

from collections.abc import Sequence


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")


def expected_tokens(alpha: float, k: float) -> float:
    """1 + alpha + alpha^2 + ... + alpha^k: the accepted run (truncated at k) plus the recovered or
    bonus token."""
    _check_alpha(alpha)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def speedup(alpha: float, k: float, c: float, r: float = 1.0) -> float:
    """Expected tokens per step / cost of a step in target forwards (k draft forwards + 1 wide
    target forward of relative cost r)."""
    return expected_tokens(alpha, k) / (k * c + r)


def best_k(alpha: float, c: float, k_max: int = 8, r: float = 1.0) -> int:
    alpha = min(max(alpha, 0.0), 1.0)
    return max(range(1, k_max + 1), key=lambda k: (speedup(alpha, k, c, r), -k))


def optimal_k(alpha: float, c: float, k_max: int = 64, r: float = 1.0) -> tuple[int, float]:
    """(k, speedup) at the best k in [1, k_max]; (0, 1.0) when no k beats plain decoding."""
    k = best_k(alpha, c, k_max, r)
    s = speedup(alpha, k, c, r)
    return (k, s) if s > 1.0 else (0, 1.0)


def break_even_alpha(c: float) -> float:
    """The acceptance rate above which speculation pays at all (r = 1): alpha > c.

    Some k pays iff E_k > k c + 1, i.e. alpha + alpha^2 + ... + alpha^k > k c. Each alpha^i <= alpha,
    so the left side is at most k alpha: no k pays when alpha <= c, and k = 1 pays when alpha > c.
    """
    return c


def arithmetic_factor(alpha: float, k: int, c_hat: float) -> float:
    """Operations per emitted token relative to plain decoding: each step runs the draft k times
    (c_hat each) and the target on k + 1 positions, and emits expected_tokens(alpha, k) tokens."""
    return (k * c_hat + k + 1) / expected_tokens(alpha, k)


def expected_tokens_per_position(alphas: Sequence[float]) -> float:
    """1 + sum_i prod_{j<=i} alpha_j: the recovered or bonus token plus each depth reached."""
    total, reach = 1.0, 1.0
    for a in alphas:
        _check_alpha(a)
        reach *= a
        total += reach
    return total


def speedup_per_position(alphas: Sequence[float], c: float, r: float = 1.0) -> float:
    """Walltime factor with k = len(alphas) and per-position acceptance rates."""
    return expected_tokens_per_position(alphas) / (len(alphas) * c + r)


def best_k_per_position(alphas: Sequence[float], c: float, r: float = 1.0) -> int:
    """The k in [1, len(alphas)] maximising speedup_per_position(alphas[:k], c, r)."""
    if not alphas:
        raise ValueError("need at least one alpha_i")
    return max(range(1, len(alphas) + 1), key=lambda k: (speedup_per_position(alphas[:k], c, r), -k))


def expected_tokens_mixture(draft_sizes: Sequence[int], alphas: Sequence[float]) -> float:
    """Mean over steps of expected_tokens_per_position(alphas[:n]) for each step's draft size n.

    ``alphas`` must cover the largest draft size; a missing alpha_i (no depth-i token was ever
    tested) counts as 0.
    """
    if not draft_sizes:
        raise ValueError("need at least one step")
    per_n: dict[int, float] = {}
    total = 0.0
    for n in draft_sizes:
        if n not in per_n:
            per_n[n] = expected_tokens_per_position([a or 0.0 for a in list(alphas[:n]) + [0.0] * (n - len(alphas))])
        total += per_n[n]
    return total / len(draft_sizes)


def neighbour_gap(alpha: float, k: int, c: float, r: float = 1.0) -> float:
    """g(k) = alpha^(k+1) (k c + r) - c E_k; S(k+1) > S(k) exactly when g(k) > 0 (constant r)."""
    return alpha ** (k + 1) * (k * c + r) - c * expected_tokens(alpha, k)


def verify_cost(k: float, r0: float, v: float) -> float:
    """r(k) = r0 + v k: the verification forward over k + 1 tokens, in 1-token forwards."""
    return r0 + v * k


def fit_verify_cost(ks: Sequence[float], rs: Sequence[float], ws: Sequence[float] | None = None) -> tuple[float, float]:
    """Least-squares (r0, v) of rs = r0 + v ks (linear regression, weighted by ``ws`` if given, e.g.
    how many steps each r averages; needs two distinct ks)."""
    n = len(ks)
    ws = [1.0] * n if ws is None else list(ws)
    if n != len(rs) or n != len(ws) or n < 2:
        raise ValueError("need as many r (and weights) as k, and at least two points")
    w = sum(ws)
    mk, mr = sum(c * k for c, k in zip(ws, ks)) / w, sum(c * r for c, r in zip(ws, rs)) / w
    sxx = sum(c * (k - mk) ** 2 for c, k in zip(ws, ks))
    if sxx == 0:
        raise ValueError("need at least two distinct k")
    v = sum(c * (k - mk) * (r - mr) for c, k, r in zip(ws, ks, rs)) / sxx
    return mr - v * mk, v


def best_k_linear(alpha: float, c: float, r0: float, v: float, k_max: int = 8) -> int:
    """argmax_k of S(alpha, k, c, r0 + v k) = S(alpha, k, c + v, r0): a per-token verification cost
    v acts like extra draft cost, the intercept r0 like the paper's fixed 1."""
    return best_k(alpha, c + v, k_max, r0)


def expected_tokens_tree(parents: Sequence[int], accept: Sequence[float]) -> float:
    """1 + sum_v prod_{u on the root path of v} accept[u]; ``parents[v]`` < v, -1 = the root."""
    if len(parents) != len(accept):
        raise ValueError("one acceptance probability per node")
    reach: list[float] = []
    for v, (par, a) in enumerate(zip(parents, accept)):
        if not -1 <= par < v:
            raise ValueError(f"node {v}: parent {par} must be -1 or an earlier node")
        _check_alpha(a)
        reach.append(a * (1.0 if par < 0 else reach[par]))
    return 1.0 + sum(reach)


def batch_verify_ratio(batch: int, k: int, t0: float, t1: float) -> float:
    """r when ``batch`` requests each verify k + 1 rows in one forward costing t0 + t1 * rows,
    against the plain step of the same batch (one row each)."""
    return (t0 + t1 * batch * (k + 1)) / (t0 + t1 * batch)
