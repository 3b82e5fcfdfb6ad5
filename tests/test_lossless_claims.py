"""The claims of docs/theory-lossless.md, computed exactly (no sampling) on small distributions.

``output_distribution`` is the exact law of the token one verification step emits for a single
drafted token: x ~ q_sampled, accepted with probability min(1, p(x) / q_reported(x)), otherwise a
token from norm(max(0, p - q_reported)). The sampling-based tests of the real verifier are in
tests/test_verify.py and tests/test_distribution.py; these tests pin down *why* it must be so.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from specdec.core.sampling import to_probs
from specdec.core.tree import Draft
from specdec.core.verify import verify


def output_distribution(p: np.ndarray, q_sampled: np.ndarray, q_reported: np.ndarray) -> np.ndarray:
    accept = np.where(q_reported > 0, np.minimum(1.0, p / np.where(q_reported > 0, q_reported, 1.0)), 0.0)
    kept = q_sampled * accept
    rest = np.maximum(p - q_reported, 0.0)
    residual = rest / rest.sum() if rest.sum() > 0 else p
    return kept + (1.0 - kept.sum()) * residual


def tv(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a - b).sum())


def f64(t: torch.Tensor) -> np.ndarray:
    a = t.double().numpy()
    return a / a.sum()


def test_rejection_sampling_reproduces_p_exactly_for_any_q():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p, q = rng.dirichlet(np.ones(7) * 0.5), rng.dirichlet(np.ones(7) * 0.5)
        assert tv(output_distribution(p, q, q), p) < 1e-12
        # the acceptance rate is 1 - TV(p, q) = sum min(p, q)
        assert (q * np.minimum(1, p / q)).sum() == pytest.approx(np.minimum(p, q).sum())


def test_a_wrongly_reported_q_breaks_exactness():
    """Invariant I3: q must be exactly the distribution the draft sampled from."""
    p = np.array([0.5, 0.3, 0.2])
    q_true = np.array([0.2, 0.2, 0.6])
    q_untempered = np.array([0.3, 0.3, 0.4])  # e.g. the draft sampled at T but reported T = 1
    assert tv(output_distribution(p, q_true, q_true), p) < 1e-12
    assert output_distribution(p, q_true, q_untempered) == pytest.approx([0.5, 0.2, 0.3])  # TV 0.10


def test_sampling_transforms_must_reach_p_the_verifier_reproduces_what_it_is_given():
    """With top-k on q only, the output is the untruncated p, not the top-k target the user asked for."""
    logits_p = torch.tensor([2.0, 1.5, 1.0, 0.0, -1.0])
    logits_q = torch.tensor([1.5, 1.8, 0.5, 0.2, -0.5])
    p_user = f64(to_probs(logits_p, 0.7, 2, 1.0))  # what temperature 0.7, top-k 2 means
    p_raw = f64(to_probs(logits_p, 1.0))
    q = f64(to_probs(logits_q, 0.7, 2, 1.0))
    assert tv(output_distribution(p_user, q, q), p_user) < 1e-12  # both transformed: exact
    wrong = output_distribution(p_raw, q, q)
    assert tv(wrong, p_raw) < 1e-12 and tv(wrong, p_user) > 0.25  # reproduces the wrong p


def typical_acceptance_output(p: np.ndarray, candidate: int, eps: float = 0.09, delta: float = 0.3) -> np.ndarray:
    """Medusa's typical acceptance for one deterministic candidate: accept when
    p(x) > min(eps, delta exp(-H(p))) (vLLM's defaults: posterior_threshold 0.09, alpha 0.3);
    when rejected, take p's most likely token (the greedy fallback)."""
    h = -float((p * np.log(p)).sum())
    out = np.zeros_like(p)
    accepted = p[candidate] > min(eps, delta * math.exp(-h))
    out[candidate if accepted else int(p.argmax())] = 1.0
    return out


def test_typical_acceptance_is_not_exact_and_the_engines_rule_is():
    p = np.array([0.5, 0.3, 0.2])
    typical = typical_acceptance_output(p, candidate=0)
    assert typical.tolist() == [1.0, 0.0, 0.0] and tv(typical, p) == pytest.approx(0.5)
    # the engine's rule for a deterministic candidate: accept with p(x), else sample from p without x
    exact = output_distribution(p, np.eye(3)[0], np.eye(3)[0])
    assert tv(exact, p) < 1e-12
    # and specdec.core.verify really does that: enumerate its two branches with a seeded generator
    counts = np.zeros(3)
    g = torch.Generator().manual_seed(0)
    draft = Draft.chain(torch.tensor([0]))
    p_rows = torch.tensor(np.stack([p, [1.0, 0.0, 0.0]]), dtype=torch.float32)
    n = 20_000
    for _ in range(n):
        v = verify(draft, p_rows, g)
        counts[(int(draft.tokens[v.path[0]]) if v.path else v.token)] += 1
    assert tv(counts / n, p) < 4 * 0.5 * np.sqrt(p * (1 - p) / n).sum()


def test_rejection_probability_is_tv_and_no_exact_scheme_accepts_more():
    """Maximal coupling: for ANY joint law of (draft x ~ q, output y ~ p), P(y = x) <= sum min(p, q)
    = 1 - TV(p, q) (at each token P(y = x = t) <= min(p(t), q(t))). Rejection sampling attains the
    bound: its joint law is a coupling with exactly that diagonal, so its rejection probability is
    TV(p, q). Checked against random couplings with the same marginals (Sinkhorn scaling)."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
        best = np.minimum(p, q).sum()
        # the joint law of rejection sampling: accept x with min(1, p/q), else y ~ norm((p - q)+)
        rest = np.maximum(p - q, 0.0)
        joint = np.diag(np.minimum(p, q)) + np.outer(np.maximum(q - p, 0.0), rest / rest.sum())
        assert joint.sum(axis=1) == pytest.approx(q) and joint.sum(axis=0) == pytest.approx(p)
        assert 1 - np.trace(joint) == pytest.approx(tv(p, q))
        for _ in range(20):  # other couplings of (q, p) put less mass on the diagonal
            m = rng.random((6, 6)) * (1 + 20 * np.eye(6) * rng.random())
            for _ in range(300):
                m *= (q / m.sum(axis=1))[:, None]
                m *= (p / m.sum(axis=0))[None, :]
            assert np.trace(m) <= best + 1e-9
    # Sun et al. (block verification, section 1): p = (1/3, 2/3), q = (2/3, 1/3), two draft tokens:
    # token-by-token verification accepts beta + beta^2 = 10/9 tokens per step (block: 11/9)
    beta = np.minimum([1 / 3, 2 / 3], [2 / 3, 1 / 3]).sum()
    assert beta + beta**2 == pytest.approx(10 / 9)


def test_the_same_transform_is_needed_but_does_not_maximise_overlap():
    """Target logits [2, 0] and draft logits [1, 0] at T = 1: the draft at the same T overlaps p by
    0.85; the draft at T = 0.5 would overlap 1.0. Sampling q at T = 0.5 and reporting it is exact
    too: what exactness needs is that the reported q is the one sampled from (I3)."""
    p = f64(to_probs(torch.tensor([2.0, 0.0]), 1.0))
    same = f64(to_probs(torch.tensor([1.0, 0.0]), 1.0))
    sharper = f64(to_probs(torch.tensor([1.0, 0.0]), 0.5))
    assert np.minimum(p, same).sum() == pytest.approx(0.850, abs=1e-3)
    assert np.minimum(p, sharper).sum() == pytest.approx(1.0, abs=1e-6)
    assert tv(output_distribution(p, sharper, sharper), p) < 1e-12


def test_typical_acceptance_can_always_emit_the_less_likely_token():
    """p = (0.9, 0.1), candidate token 1: the threshold is min(0.09, 0.3 exp(-H)) = 0.09 < 0.1, so
    the candidate is accepted every time and token 1 (probability 0.1 under p) is emitted always."""
    p = np.array([0.9, 0.1])
    h = -float((p * np.log(p)).sum())
    assert min(0.09, 0.3 * math.exp(-h)) == pytest.approx(0.09)
    out = typical_acceptance_output(p, candidate=1)
    assert out.tolist() == [0.0, 1.0] and tv(out, p) == pytest.approx(0.9)
    assert tv(output_distribution(p, np.eye(2)[1], np.eye(2)[1]), p) < 1e-12  # the exact rule
