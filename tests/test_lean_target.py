"""specdec/models/lean_target.py: the target's lean forward against transformers' decoder on the shipped
target, at every kind of call the loop makes (prefill, a plain step, a chain, a token tree), to
float tolerance, writing the same cache; and a model it cannot run keeps transformers' forward."""

from __future__ import annotations

import pytest
import torch

from specdec.core.tree import Draft
from specdec.models import cache as kv
from specdec.models.target import Target


def _both(engine, fn):
    """fn(target) on each forward from the same state; returns {path: output}."""
    target, out = engine.target, {}
    before = target.path
    try:
        for path in target.paths:
            target.use(path)
            out[path] = fn(target)
    finally:
        target.use(before)
        kv.truncate(target.cache, 0)
        target.ids = []
    return out


def test_lean_forward_matches_transformers_at_every_call(engine) -> None:
    assert engine.target.paths == ("hf", "lean")
    prompt = engine.encode("def fibonacci(n):\n    if n < 2:\n        return n\n")
    chain = Draft.chain([11, 12, 13])
    tree = Draft.from_parents([11, 12, 13, 14, 15], [-1, -1, 0, 0, 2])

    def run(target):
        target.prefill(prompt)
        logits = [target.score(prompt[-1], Draft.empty())]
        target.commit(())
        logits.append(target.score(7, chain))
        target.commit((0, 1))
        logits.append(target.score(9, tree))
        target.commit((1,))
        logits.append(target.score(5, Draft.empty()))
        length = kv.length(target.cache)
        keys = target.cache.layers[-1].keys[0, :, :length].clone()
        return logits, target.hidden.clone(), keys, list(target.ids)

    got = _both(engine, run)
    (lh, hh, kh, ih), (ll, hl, kl, il) = got["hf"], got["lean"]
    assert ih == il and kh.shape == kl.shape
    for a, b in zip(lh, ll):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(hl, hh, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(kl, kh, rtol=1e-4, atol=1e-4)


def test_switching_forward_mid_sequence_keeps_the_cache_valid(engine) -> None:
    prompt = engine.encode("import os\nimport sys\n")

    def run(target):
        target.prefill(prompt)
        target.score(prompt[-1], Draft.chain([3, 4]))
        target.commit((0,))
        target.use("lean" if target.path == "hf" else "hf")  # the other forward reads this cache
        return target.score(5, Draft.empty())

    got = _both(engine, run)
    torch.testing.assert_close(got["lean"], got["hf"], rtol=1e-4, atol=1e-4)


def test_a_model_the_lean_forward_cannot_run_keeps_transformers(engine) -> None:
    model = engine.target.model
    cfg = model.config
    saved = cfg.hidden_act
    try:
        cfg.hidden_act = "gelu"
        assert Target(model).paths == ("hf",)
    finally:
        cfg.hidden_act = saved
    with pytest.raises(ValueError, match="not available"):
        Target(model).use("fast")
