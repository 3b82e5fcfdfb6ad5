"""specdec.core.theory: what each formula is checked against, and how a wrong formula would fail.

Checked by a Monte Carlo simulation of the acceptance process itself (the simulation does not flip
alpha-coins: at every draft position it draws x ~ q_i from a real small-vocabulary distribution and
accepts it with probability min(1, p_i(x) / q_i(x)), exactly as the verifier does, so alpha_i only
enters through p_i and q_i and the claim alpha_i = 1 - TV(p_i, q_i) is checked too):
  - expected_tokens (E[tokens per step]), expected_tokens_per_position, expected_tokens_mixture;
  - arithmetic_factor (operations counted in the simulation).
Checked by the real verifier (specdec.core.verify on a deterministic tree): expected_tokens_tree.
Checked as exact algebra on a grid: the walltime speedup S = E / (k c + r) is E divided by an
assumed cost, so the "simulated clock" test checks E and the argmax over k, not the cost model;
break-even alpha = c; best_k is the brute-force argmax; the neighbour gap identity
g(k+1) - g(k) = -(1 - alpha) alpha^(k+1) ((k+1) c + r) and the unimodality it implies; the
identities S(alpha, k, c, r0 + v k) = S(alpha, k, c + v, r0) = S(alpha, k, (c + v)/r0, 1) / r0;
batch_verify_ratio's limits.
Checked against measurements in docs/results (the cost model, which no simulation can check):
the linear fit r(k) = r0 + v k of the measured verification cost (sweep-k-cpu.json), the optimum k it
predicts against the measured best k, and the forward cost per row (rows-cost-cpu.json).
Every Monte Carlo comparison is seeded and bounded by a few standard errors, and each test also
shows that a plausible wrong formula (no bonus token, infinite k, the mean draft length plugged into
a concave formula, a constant r, ...) lands many standard errors (or a clear margin) away.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from specdec.core.theory import (
    arithmetic_factor,
    batch_verify_ratio,
    best_k,
    best_k_linear,
    best_k_per_position,
    break_even_alpha,
    expected_tokens,
    expected_tokens_mixture,
    expected_tokens_per_position,
    expected_tokens_tree,
    fit_verify_cost,
    neighbour_gap,
    optimal_k,
    speedup,
    speedup_per_position,
    verify_cost,
)
from specdec.core.tree import Draft
from specdec.core.verify import verify

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"

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


def accepted_runs(
    pairs: list[tuple[np.ndarray, np.ndarray]], n: int, rng: np.random.Generator, sizes: np.ndarray | None = None
) -> np.ndarray:
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
    no_bonus = (1 - alpha**k) / (1 - alpha)  # forgets the token sampled after the run
    infinite_k = 1 / (1 - alpha)  # forgets that the run stops at k
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
    more than a 1-token one, as measured on a CPU); the baseline emits one token per unit. The clock
    is the assumed cost, so this checks E[tokens per step] and the argmax over k; whether k c + r is
    the real cost is checked against the measured sweep (test_linear_verify_cost_fits_the_sweep)."""
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
    assert (
        sim[best_k(alpha, c, 12, r)] > sim[1] + FAR * ses[1] and sim[best_k(alpha, c, 12, r)] > sim[12] + FAR * ses[12]
    )
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
        (1 - alpha) * (k * c_hat + k + 1) / (1 - alpha ** (k + 1))
    )


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


def test_neighbour_gap_identity_and_unimodality():
    """S(k+1) > S(k) iff g(k) > 0, and g falls by (1 - alpha) alpha^(k+1) ((k+1) c + r) per step,
    so once S stops rising it never rises again. The left side alpha^(k+1) (k c + r) alone need not
    fall (the argument docs/theory-speedup.md used to give): at alpha 0.95, c 0.5 it rises."""
    for alpha in (0.3, 0.6, 0.8, 0.95, 0.99):
        for c in (0.01, 0.1, 0.5):
            for r in (1.0, 1.6):
                s = [speedup(alpha, k, c, r) for k in range(1, 41)]
                for k in range(1, 40):
                    gap = neighbour_gap(alpha, k + 1, c, r) - neighbour_gap(alpha, k, c, r)
                    assert gap == pytest.approx(-(1 - alpha) * alpha ** (k + 1) * ((k + 1) * c + r), abs=1e-12)
                    assert (s[k] > s[k - 1]) == (neighbour_gap(alpha, k, c, r) > 1e-15)
                rising = [b > a for a, b in zip(s, s[1:])]
                assert rising == sorted(rising, reverse=True)  # True ... True False ... False: unimodal
    # a plausible slip (k c instead of (k+1) c) is off by the visible (1 - alpha) alpha^(k+1) c
    alpha, c, r, k = 0.8, 0.3, 1.0, 3
    wrong = -(1 - alpha) * alpha ** (k + 1) * (k * c + r)
    assert abs(neighbour_gap(alpha, k + 1, c, r) - neighbour_gap(alpha, k, c, r) - wrong) > 0.02
    left = [0.95 ** (k + 1) * (k * 0.5 + 1) for k in range(1, 6)]
    assert left[0] == pytest.approx(1.354, abs=1e-3) and left[-1] == pytest.approx(2.572, abs=1e-3)
    assert all(b > a for a, b in zip(left, left[1:]))


def test_linear_verify_cost_identities():
    for alpha in (0.5, 0.7, 0.9):
        for c, r0, v in ((0.05, 1.0, 0.1), (0.15, 1.23, 0.08), (0.3, 2.0, 0.0)):
            for k in range(1, 13):
                s = speedup(alpha, k, c, verify_cost(k, r0, v))
                assert s == pytest.approx(speedup(alpha, k, c + v, r0))
                assert s == pytest.approx(speedup(alpha, k, (c + v) / r0, 1.0) / r0)
                assert speedup(alpha, k, c, r0) == pytest.approx(speedup(alpha, k, c / r0) / r0)
            brute = max(range(1, 13), key=lambda k: (speedup(alpha, k, c, verify_cost(k, r0, v)), -k))
            assert best_k_linear(alpha, c, r0, v, 12) == brute
    # the slope matters: a constant r = r(mean k) prefers a longer draft than the rising r does
    assert best_k(0.8, 0.05, 12, r=verify_cost(6, 1.0, 0.1)) > best_k_linear(0.8, 0.05, 1.0, 0.1, 12)
    r0, v = fit_verify_cost([1, 2, 4, 8], [1.2 + 0.08 * k for k in (1, 2, 4, 8)])
    assert (r0, v) == pytest.approx((1.2, 0.08))
    with pytest.raises(ValueError):
        fit_verify_cost([2, 2], [1.0, 1.1])
    # weighted: a point that averages 9 steps counts 9 times (equal to repeating it)
    ks, rs = [1, 4, 8], [1.1, 1.3, 2.0]
    assert fit_verify_cost(ks, rs, [1, 9, 1]) == pytest.approx(
        fit_verify_cost([1] + [4] * 9 + [8], [1.1] + [1.3] * 9 + [2.0])
    )
    assert fit_verify_cost(ks, rs, [1, 1, 1]) == pytest.approx(fit_verify_cost(ks, rs))


def _sweep_rows(method: str) -> list[dict]:
    rows = json.loads((RESULTS / "sweep-k-cpu.json").read_text())["methods"]
    return [row for name, row in rows.items() if name.startswith(method + "@")]


def test_linear_verify_cost_fits_the_sweep():
    """The measured r rises with k (draft rows of docs/results/sweep-k-cpu.json): a line fits it
    far better than a constant, and the optimum it predicts is within one of the measured best k."""
    rows = _sweep_rows("draft")
    ks, rs = [row["k_mean"] for row in rows], [row["r_mean"] for row in rows]
    r0, v = fit_verify_cost(ks, rs)

    def rmse(pred: list[float]) -> float:
        return float(np.sqrt(np.mean([(r - p) ** 2 for r, p in zip(rs, pred)])))

    linear, constant = rmse([verify_cost(k, r0, v) for k in ks]), rmse([float(np.mean(rs))] * len(rs))
    assert v > 0.03 and 1.0 < r0 < 1.5 and linear < 0.1 and constant > 2 * linear
    alpha = float(np.mean([row["alpha_cond"] for row in rows]))
    c = float(np.mean([row["c_mean"] for row in rows]))
    k_pred = best_k_linear(alpha, c, r0, v)
    k_meas = max(rows, key=lambda row: row["speedup"])["k"]
    assert abs(k_pred - k_meas) <= 1
    measured = {row["k"]: row["speedup"] for row in rows}
    for k in measured:  # the i.i.d. speedup with the fitted cost, against each measured row
        assert speedup(alpha, k, c, verify_cost(k, r0, v)) == pytest.approx(measured[k], rel=0.15)
    assert speedup(alpha, 8, c) > 1.15 * measured[8]  # the paper's r = 1 misses by more


def test_tree_expected_tokens_matches_the_real_verifier():
    """A deterministic tree (q = None) through specdec.core.verify: node v is accepted with probability
    p_parent(x_v) once its parent is (its earlier siblings' rejections renormalise the residual,
    which exactly cancels), so E[tokens per step] = 1 + sum_v prod_path p_parent(x_u)."""
    rng = np.random.default_rng(21)
    parents = [-1, -1, 0, 0, 1, 2, 2, 4]  # two roots, branching below
    tokens = [0, 1, 2, 3, 0, 1, 4, 2]
    V = 5
    p = rng.dirichlet(np.ones(V), size=len(parents) + 1)  # row 0: the root, row v+1: after node v
    for par, tok in zip(parents, tokens):  # make the candidates likely, as a trained drafter would
        p[par + 1][tok] += 2.0
    p /= p.sum(axis=1, keepdims=True)
    accept = [p[par + 1][tok] for par, tok in zip(parents, tokens)]
    draft = Draft.from_parents(torch.tensor(tokens), parents)
    rows = torch.tensor(p, dtype=torch.float32)
    g = torch.Generator().manual_seed(0)
    n = 20_000
    emitted = np.array([len(verify(draft, rows, g).path) + 1 for _ in range(n)], dtype=float)
    mean, se = float(emitted.mean()), float(emitted.std(ddof=1) / np.sqrt(n))
    assert abs(mean - expected_tokens_tree(parents, accept)) < TIGHT * se
    # wrong: the conditional test probability r_j(x_j) = p(x_j) / (1 - earlier siblings' p)
    seen: dict[int, float] = {}
    cond = []
    for par, tok in zip(parents, tokens):
        cond.append(p[par + 1][tok] / (1 - seen.get(par, 0.0)))
        seen[par] = seen.get(par, 0.0) + p[par + 1][tok]
    assert abs(mean - expected_tokens_tree(parents, cond)) > FAR * se
    assert expected_tokens_tree([-1, 0, 1], [0.9, 0.7, 0.5]) == pytest.approx(
        expected_tokens_per_position([0.9, 0.7, 0.5])
    )


def test_batch_verify_ratio_limits():
    assert batch_verify_ratio(1, 4, 1.0, 0.0) == 1.0  # fixed cost only: verification is free
    assert batch_verify_ratio(1, 4, 0.0, 1.0) == 5.0  # rows only: k + 1 times a plain step
    rs = [batch_verify_ratio(b, 4, 1.0, 0.05) for b in (1, 2, 4, 8, 16, 64, 1024)]
    assert all(b > a for a, b in zip(rs, rs[1:])) and rs[0] < 1.25 and rs[-1] > 4.5


def test_batch_verify_ratio_against_the_measured_forward_cost():
    """docs/results/rows-cost-cpu.json: target forward ms against the rows scored. A line fits it,
    and the r it predicts for B requests drafting k tokens, t(B (k+1)) / t(B), matches the measured
    ratio; a fixed cost alone (r = 1, the paper) or rows alone (r = k + 1) do not."""
    data = json.loads((RESULTS / "rows-cost-cpu.json").read_text())
    t = dict(zip(data["config"]["rows"], data["ms_median"]))
    t0, t1 = fit_verify_cost(list(t), list(t.values()))
    assert t0 > 0 and t1 > 0
    assert max(abs(t0 + t1 * n - ms) / ms for n, ms in t.items()) < 0.1
    for batch, k in ((1, 3), (1, 8), (2, 3), (4, 3), (8, 3), (16, 3), (4, 5), (8, 7)):
        measured = t[batch * (k + 1)] / t[batch]
        assert batch_verify_ratio(batch, k, t0, t1) == pytest.approx(measured, rel=0.1)
        assert abs(measured - 1.0) > 0.02 and abs(measured - (k + 1)) > 1.0


def test_with_r_above_one_k_equal_one_no_longer_decides_break_even():
    """With r = 1, some k pays iff k = 1 does (alpha > c). With r > 1 a longer draft can pay where
    k = 1 does not: sum_{i<=k} alpha^i > k c + r - 1."""
    assert speedup(0.5, 1, 0.0, 1.6) < 1.0 < speedup(0.5, 8, 0.0, 1.6)
    for k in (1, 8):
        pays = sum(0.5**i for i in range(1, k + 1)) > k * 0.0 + 1.6 - 1
        assert pays == (speedup(0.5, k, 0.0, 1.6) > 1.0)
