"""Closed-form speedup model of speculative decoding (Leviathan et al. 2023, section 3).

Contract, with alpha the per-token acceptance rate (i.i.d. assumption), k the draft length and
c = draft forward cost / target forward cost:
- ``expected_tokens(alpha, k)`` = E[tokens per target forward] = (1 - alpha^(k+1)) / (1 - alpha)
- ``speedup(alpha, k, c)`` = expected_tokens / (k c + 1), the walltime improvement factor
- ``best_k(alpha, c, k_max)`` = argmax over k in [1, k_max] of ``speedup``
- ``expected_tokens_per_position(alphas)``: the same without the i.i.d. assumption, from
  per-position acceptance rates alpha_i (P(reach depth i) = prod_{j<=i} alpha_j).
"""
from __future__ import annotations


def expected_tokens(alpha: float, k: int) -> float:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def speedup(alpha: float, k: int, c: float) -> float:
    return expected_tokens(alpha, k) / (k * c + 1.0)


def best_k(alpha: float, c: float, k_max: int = 8) -> int:
    alpha = min(max(alpha, 0.0), 1.0)
    return max(range(1, k_max + 1), key=lambda k: speedup(alpha, k, c))


def expected_tokens_per_position(alphas: list[float]) -> float:
    """1 + sum_i prod_{j<=i} alpha_j: the bonus/recovered token plus each reached depth."""
    total, reach = 1.0, 1.0
    for a in alphas:
        reach *= a
        total += reach
    return total
