"""The two acceptance rates of ``Stats`` (issue 33): ``alpha_tested`` = accepted / tested recovers the
per-token acceptance probability of Leviathan et al.'s i.i.d. model from simulated rejection
sampling, ``alpha`` = accepted / drafted does not, and the bench's i.i.d. prediction takes the former."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specdec.bench import merge as BM
from specdec.bench.metrics import cost_model
from specdec.bench.run import Row
from specdec.core.events import Stats, StepEvent
from specdec.core.theory import expected_tokens, expected_tokens_mixture

A = 0.8
STEPS = 200_000
DEPTHS = {n: list(range(1, n + 1)) for n in range(10)}  # 1-based depths 1..n


def _simulate(sizes: np.ndarray, seed: int) -> tuple[Stats, np.ndarray]:
    """One step per draft size: each drafted token is accepted with probability A until the first
    rejection (the verifier tests the rejected token and stops; later drafted tokens are never
    tested). Returns the Stats and the number of tokens each step emitted."""
    rng = np.random.default_rng(seed)
    coins = rng.random((len(sizes), max(int(sizes.max()), 1))) < A
    # accepted run length: the first False among the first k coins, k when all k are True
    first_false = np.where(coins.all(axis=1), coins.shape[1], np.argmin(coins, axis=1))
    accepted = np.minimum(first_false, sizes)
    st = Stats()
    for k, n in zip(sizes.tolist(), accepted.tolist()):
        st.record(DEPTHS[k], DEPTHS[min(n + 1, k)], DEPTHS[n], n + 1)
    return st, accepted + 1


def _se_binomial(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


def test_alpha_tested_recovers_the_per_token_acceptance_at_fixed_k():
    k = 4
    st, emitted = _simulate(np.full(STEPS, k), seed=33)
    tested = sum(st.tested_at)
    assert st.drafted == k * STEPS and sum(st.accepted_at) == st.accepted
    # accepted / tested: each tested token is one Bernoulli(A) trial
    assert abs(st.alpha_tested - A) < 4 * _se_binomial(A, tested)
    # accepted / drafted: A (1 - A^k) / (k (1 - A)) = 0.59, far from A
    se_alpha = emitted.std(ddof=1) / math.sqrt(STEPS) / k
    drafted_rate = A * (1 - A**k) / (k * (1 - A))
    assert abs(st.alpha - drafted_rate) < 4 * se_alpha
    assert abs(st.alpha - A) > 10 * se_alpha
    # the i.i.d. formula with alpha_tested predicts the measured tau
    se_tau = emitted.std(ddof=1) / math.sqrt(STEPS)
    h = 1e-6
    slope = (expected_tokens(A + h, k) - expected_tokens(A - h, k)) / (2 * h)
    se_pred = slope * _se_binomial(A, tested)
    assert abs(expected_tokens(st.alpha_tested, k) - st.tau) < 4 * math.hypot(se_tau, se_pred)
    # ... and with accepted / drafted it does not
    assert st.tau - expected_tokens(st.alpha, k) > 10 * math.hypot(se_tau, se_pred)


def test_alpha_tested_recovers_the_per_token_acceptance_with_mixed_draft_sizes():
    rng = np.random.default_rng(7)
    sizes = rng.choice([0, 2, 8], size=STEPS)
    st, emitted = _simulate(sizes, seed=34)
    assert abs(st.alpha_tested - A) < 4 * _se_binomial(A, sum(st.tested_at))
    se_tau = emitted.std(ddof=1) / math.sqrt(STEPS)
    assert abs(expected_tokens_mixture(sizes.tolist(), [A] * 8) - st.tau) < 4 * se_tau
    assert abs(st.alpha - A) > 0.1  # accepted / drafted is pulled down by the 8-token drafts


def test_alpha_tested_is_none_when_nothing_was_tested_and_is_in_to_dict():
    assert Stats().alpha_tested is None and Stats().to_dict()["alpha_tested"] is None
    st = Stats()
    st.record([1, 2, 3, 4], [1, 2], [1], 2)
    assert st.alpha == pytest.approx(1 / 4) and st.alpha_tested == pytest.approx(1 / 2)
    assert st.to_dict()["alpha_tested"] == pytest.approx(1 / 2)


class _Res:
    def __init__(self, stats: Stats, sizes: list[int]) -> None:
        self.stats = stats
        self.events = [
            StepEvent(i, (), stats, {"propose": 0.2 * n, "score": 10.0, "verify": 0.1}, n) for i, n in enumerate(sizes)
        ]


def test_cost_model_iid_prediction_takes_accepted_over_tested():
    # two steps of k = 4: all four accepted (4 tested), then the first rejected (1 tested)
    st = Stats()
    st.record([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], 5)
    st.record([1, 2, 3, 4], [1], [], 1)
    assert st.alpha == pytest.approx(4 / 8) and st.alpha_tested == pytest.approx(4 / 5)
    out = cost_model(Row("draft", "draft", 4), [[([0] * 6, 1.0, _Res(st, [4, 4]))]], target_ms=10.0)
    assert out["alpha_tested"] == pytest.approx(0.8) and (out["tested"], out["accepted"]) == (5, 4)
    c, k_mean = out["c"], out["k_mean"]
    assert c == pytest.approx(0.2 / 10.0) and k_mean == 4.0
    assert out["predicted_speedup_iid"] == pytest.approx(expected_tokens(0.8, 4) / (k_mean * c + 1.0))
    assert out["predicted_speedup_iid"] != pytest.approx(expected_tokens(0.5, 4) / (k_mean * c + 1.0))


def _row(tokens, tau, alpha, k_mean, tested=None, accepted=None):
    d = {
        "tokens_per_s": 1.0,
        "tokens_per_s_median": 1.0,
        "speedup": None,
        "speedup_median": 1.0,
        "identical": 1,
        "n_prompts": 1,
        "total_tokens": tokens,
        "total_s": 1.0,
        "tau": tau,
        "alpha": alpha,
        "k_mean": k_mean,
    }
    if tested is not None:
        d.update(tested=tested, accepted=accepted, alpha_tested=accepted / tested if tested else None)
    return d


def _result(none, draft):
    return {"config": {"n_prompts": 1}, "methods": {"none": none, "draft": draft}, "hf": {}, "fastest_plain": {}}


def test_merge_recombines_alpha_tested_from_its_counts():
    a = _result(_row(100, 1.0, None, 0.0, 0, 0), _row(100, 2.0, 0.5, 2.0, 60, 50))
    b = _result(_row(100, 1.0, None, 0.0, 0, 0), _row(100, 4.0, 0.75, 4.0, 40, 35))
    m = BM.merge([a, b])["methods"]
    assert m["draft"]["alpha_tested"] == pytest.approx(85 / 100) and m["draft"]["tested"] == 100
    assert m["none"]["alpha_tested"] is None
    old = _result(_row(100, 1.0, None, 0.0), _row(100, 2.0, 0.5, 2.0))  # a slice without the counts
    assert BM.merge([old, b])["methods"]["draft"]["alpha_tested"] is None
