"""Auto-k: acceptance is inferred from the committed tokens, and k follows the theory's argmax."""

from __future__ import annotations

from engine.proposers.draft import AcceptanceTracker
from engine.theory import best_k


def test_tracker_infers_acceptance_from_committed_tokens():
    tr = AcceptanceTracker(decay=1.0, prior_alpha=0.5)
    base = [tr.accepted, tr.rejections]
    tokens = [1, 2, 3]
    tr.remember(tokens, [7, 8, 9])
    tokens.extend([7, 8, 5])  # two accepted, then a recovered token
    tr.observe(tokens)
    assert (tr.accepted, tr.rejections) == (base[0] + 2, base[1] + 1)
    tr.remember(tokens, [4, 4])
    tokens.extend([4, 4, 6])  # all accepted plus a bonus token: no rejection
    tr.observe(tokens)
    assert (tr.accepted, tr.rejections) == (base[0] + 4, base[1] + 1)


def test_tracker_ignores_a_draft_from_another_request():
    tr = AcceptanceTracker(decay=1.0)
    before = (tr.accepted, tr.rejections)
    tr.remember([1, 2, 3], [4, 5])
    tr.observe([1, 2, 3, 4, 5, 6])  # a different list object: a new request
    assert (tr.accepted, tr.rejections) == before


def test_alpha_drives_k():
    tr = AcceptanceTracker(decay=1.0, prior_alpha=0.5)
    tokens = [0]
    for _ in range(20):
        tr.remember(tokens, [1, 1, 1, 1])
        tokens.extend([1, 1, 1, 1, 2])
        tr.observe(tokens)
    assert tr.alpha > 0.9
    assert best_k(tr.alpha, 0.05, 8) >= 6 and best_k(0.3, 0.05, 8) <= 3
