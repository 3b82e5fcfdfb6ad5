"""The closed-form speedup model against a Monte Carlo simulation of the acceptance process."""
from __future__ import annotations

import random

import pytest

from engine.theory import best_k, expected_tokens, expected_tokens_per_position, speedup


def simulate(alphas: list[float], trials: int, seed: int = 0) -> float:
    rng = random.Random(seed)
    total = 0
    for _ in range(trials):
        n = 1  # the recovered or bonus token
        for a in alphas:
            if rng.random() >= a:
                break
            n += 1
        total += n
    return total / trials


@pytest.mark.parametrize("alpha, k", [(0.0, 3), (0.5, 1), (0.6, 4), (0.8, 6), (0.95, 8)])
def test_expected_tokens_matches_simulation(alpha, k):
    assert simulate([alpha] * k, 40_000) == pytest.approx(expected_tokens(alpha, k), rel=0.02, abs=0.01)


def test_per_position_version_matches_simulation_and_reduces_to_iid():
    alphas = [0.9, 0.7, 0.5, 0.3]
    assert simulate(alphas, 40_000, seed=1) == pytest.approx(expected_tokens_per_position(alphas), rel=0.02)
    assert expected_tokens_per_position([0.6] * 5) == pytest.approx(expected_tokens(0.6, 5))


def test_speedup_and_best_k():
    assert expected_tokens(1.0, 4) == 5.0
    assert speedup(0.8, 4, 0.0) == pytest.approx(expected_tokens(0.8, 4))
    assert speedup(0.0, 3, 0.5) == pytest.approx(1 / 2.5)
    assert best_k(0.9, 0.01) == 8 and best_k(0.3, 0.5) == 1
    k = best_k(0.8, 0.1, 16)
    assert all(speedup(0.8, k, 0.1) >= speedup(0.8, j, 0.1) for j in range(1, 17))
