"""engine.theory against a Monte Carlo simulation of the acceptance process itself.

The simulation does not flip alpha-coins: at every draft position it draws x ~ q_i from a real
small-vocabulary distribution and accepts it with probability min(1, p_i(x) / q_i(x)), exactly as
the verifier does. alpha_i then only enters through p_i and q_i (alpha_i = sum_x min(p_i, q_i)), so
the test checks both the algebra and the claim that the acceptance rate is 1 - TV(p, q). Every
comparison is seeded and bounded by a few standard errors, and each test also shows that a
plausible wrong formula (no bonus token, infinite k, the mean draft length plugged into a concave
formula, ...) lands many standard errors away: the tests would fail for it.
"""
from __future__ import annotations

import numpy as np
import pytest

from engine.theory import (arithmetic_factor, best_k, best_k_per_position, break_even_alpha, expected_tokens,
                           expected_tokens_mixture, expected_tokens_per_position, optimal_k, speedup,
                           speedup_per_position)

V = 6
N = 200_000
TIGHT, FAR = 4.0, 10.0  # standard errors: the formula must be within TIGHT, a wrong one beyond FAR


def pair(alpha: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
    """A random target p and a draft q = (1 - t) p + t u with sum_x min(p, q) = alpha exactly."""
    p = rng.dirichlet(np.ones(V))
    u = np.zeros(V)
    u[int(np.argmin(p))] = 1.0  # q moves mass towards p's least likely token
    overlap = lambda t: np.minimum(p, (1 - t) * p + t * u).sum()
    lo, hi = 0.0, 1.0
    if overlap(1.0) > alpha:
        raise ValueError("alpha too small for this p")
    for _ in range(60):  # overlap falls monotonically in t
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if overlap(mid) > alpha else (lo, mid)
    q = (1 - lo) * p + lo * u
    return p, q, float(np.minimum(p, q).sum())


def accepted_runs(pairs: list[tuple[np.ndarray, np.ndarray]], n: int, rng: np.random.Generator,
                  sizes: np.ndarray | None = None) -> np.ndarray:
    """Accepted draft tokens in each of n simulated steps: position i draws x ~ q_i and accepts it
    with probability min(1, p_i(x)/q_i(x)); the run stops at the first rejection (or at the step's
    draft size, when ``sizes`` gives one per step)."""
    alive = np.ones(n, dtype=bool)
    run = np.zeros(n, dtype=np.int64)
    for i, (p, q) in enumerate(pairs):
        x = np.searchsorted(np.cumsum(q), rng.random(n) * q.sum(), side="right").clip(max=V - 1)
        ok = rng.random(n) < np.minimum(1.0, p[x] / q[x])
        alive &= ok if sizes is None else ok & (i < sizes)
        run += alive
    return run


def mean_se(x: np.ndarray) -> tuple[float, float]:
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(len(x)))


@pytest.mark.parametrize("alpha, k", [(0.3, 1), (0.5, 4), (0.6, 3), (0.8, 5), (0.9, 8)])
def test_expected_tokens_matches_rejection_sampling(alpha, k):
    rng = np.random.default_rng(1000 + k)
    p, q, a = pair(alpha, rng)
    assert a == pytest.approx(alpha, abs=1e-9)
    tokens, se = mean_se(1 + accepted_runs([(p, q)] * k, N, rng))  # + the recovered or bonus token
    assert abs(tokens - expected_tokens(alpha, k)) < TIGHT * se
    no_bonus = (1 - alpha ** k) / (1 - alpha)      # forgets the token sampled after the run
    infinite_k = 1 / (1 - alpha)                   # forgets that the run stops at k
    assert abs(tokens - no_bonus) > FAR * se and abs(tokens - infinite_k) > FAR * se


def test_per_position_version_matches_and_iid_with_the_mean_alpha_does_not():
    rng = np.random.default_rng(7)
    alphas = [0.9, 0.75, 0.6, 0.45, 0.3]
    pairs = [pair(a, rng)[:2] for a in alphas]
    tokens, se = mean_se(1 + accepted_runs(pairs, N, rng))
    assert abs(tokens - expected_tokens_per_position(alphas)) < TIGHT * se
    assert abs(tokens - expected_tokens(float(np.mean(alphas)), len(alphas))) > FAR * se
    assert expected_tokens_per_position([0.6] * 5) == pytest.approx(expected_tokens(0.6, 5))


def test_mixture_of_draft_sizes_matches_and_the_mean_size_overstates():
    """Prompt lookup drafts nothing when no n-gram matches and up to 8 tokens when one does."""
    rng = np.random.default_rng(11)
    alphas = [0.85, 0.85, 0.9, 0.9, 0.9, 0.95, 0.95, 0.95]
    pairs = [pair(a, rng)[:2] for a in alphas]
    sizes = rng.choice([0, 2, 8], size=N, p=[0.45, 0.15, 0.4])
    tokens, se = mean_se(1 + accepted_runs(pairs, N, rng, sizes))
    assert abs(tokens - expected_tokens_mixture(sizes.tolist(), alphas)) < TIGHT * se
    k_mean = float(sizes.mean())  # what a mean-k formula sees
    assert expected_tokens(0.9, k_mean) - tokens > FAR * se


def test_walltime_speedup_and_optimal_k_match_a_simulated_clock():
    """Each step costs k c + r target-forward units (r = 1.3: the wide verification forward costs
    more than a 1-token one, as measured on a CPU); the baseline emits one token per unit."""
    rng = np.random.default_rng(3)
    alpha, c, r = 0.8, 0.1, 1.3
    p, q, _ = pair(alpha, rng)
    ks = range(1, 13)
    sim, ses = {}, {}
    for k in ks:
        tokens = 1 + accepted_runs([(p, q)] * k, N, rng)
        sim[k], ses[k] = tokens.sum() / (N * (k * c + r)), tokens.std(ddof=1) / np.sqrt(N) / (k * c + r)
        assert abs(sim[k] - speedup(alpha, k, c, r)) < TIGHT * ses[k]
    k_sim = max(ks, key=lambda k: sim[k])
    assert abs(k_sim - best_k(alpha, c, 12, r)) <= 1  # the optimum is flat; its neighbours are within noise
    assert sim[best_k(alpha, c, 12, r)] > sim[1] + FAR * ses[1] and sim[best_k(alpha, c, 12, r)] > sim[12] + FAR * ses[12]
    # a wrong cost model (the target forward forgotten: E / (k c)) would prefer k = 1 by far
    assert max(ks, key=lambda k: expected_tokens(alpha, k) / (k * c)) == 1
    assert abs(sim[3] - speedup(alpha, 3, c)) > FAR * ses[3]  # and so would the paper's r = 1 here


def test_arithmetic_factor_matches_counted_operations():
    rng = np.random.default_rng(5)
    alpha, k, c_hat = 0.7, 4, 0.05
    p, q, _ = pair(alpha, rng)
    tokens = 1 + accepted_runs([(p, q)] * k, N, rng)
    ops_per_token = (k * c_hat + k + 1) * N / tokens.sum()  # draft k times, target on k + 1 positions
    assert ops_per_token == pytest.approx(arithmetic_factor(alpha, k, c_hat), rel=0.01)
    assert (k * c_hat + 1) / expected_tokens(alpha, k) < 0.8 * ops_per_token  # forgetting the wide forward
    assert arithmetic_factor(alpha, k, c_hat) == pytest.approx(
        (1 - alpha) * (k * c_hat + k + 1) / (1 - alpha ** (k + 1)))


def test_break_even_and_optimal_k():
    for c in (0.05, 0.2, 0.5):
        assert break_even_alpha(c) == c
        for alpha in np.linspace(0.0, 0.99, 34):
            pays = any(speedup(alpha, k, c) > 1 + 1e-12 for k in range(1, 65))
            assert pays == (alpha > c + 1e-12), (alpha, c)
            assert optimal_k(alpha, c)[0] == (best_k(alpha, c, 64) if pays else 0)


def test_best_k_is_the_brute_force_argmax_and_per_position_agrees_with_iid():
    for alpha in (0.3, 0.6, 0.8, 0.9, 0.97):
        for c in (0.01, 0.1, 0.3):
            k = best_k(alpha, c, 16)
            assert all(speedup(alpha, k, c) >= speedup(alpha, j, c) for j in range(1, 17))
            assert best_k_per_position([alpha] * 16, c) == k
    assert best_k(0.9, 0.01) == 8 and best_k(0.3, 0.5) == 1
    # falling acceptance shortens the best draft; r > 1 (a costly wide forward) lengthens it
    assert best_k_per_position([0.9, 0.7, 0.5, 0.3, 0.2, 0.1], 0.1) < best_k(0.9, 0.1, 6)
    assert best_k(0.7, 0.1, 16, r=1.5) == 5 > best_k(0.7, 0.1, 16) == 4
    assert speedup_per_position([0.8, 0.6], 0.1, 1.2) == pytest.approx((1 + 0.8 + 0.48) / 1.4)


def test_edge_cases():
    assert expected_tokens(1.0, 4) == 5.0 and expected_tokens(0.0, 3) == 1.0
    assert speedup(0.8, 4, 0.0) == pytest.approx(expected_tokens(0.8, 4))
    assert speedup(0.0, 3, 0.5) == pytest.approx(1 / 2.5)
    assert expected_tokens_mixture([0, 0], [0.9]) == 1.0
    assert expected_tokens_mixture([3], [0.5]) == 1.5  # missing alpha_2, alpha_3 count as 0
    with pytest.raises(ValueError):
        expected_tokens(1.2, 3)
    with pytest.raises(ValueError):
        expected_tokens_mixture([], [0.5])
