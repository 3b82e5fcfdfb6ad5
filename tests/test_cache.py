"""Cache and target: after a commit (chain or tree path) the next step's logits equal a fresh
forward over the committed tokens; tree-masked rows equal plain forwards over each node's path."""

from __future__ import annotations

import torch

from specdec.core.tree import Draft
from specdec.models.target import Target


def fresh_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def test_chain_commit_matches_fresh_forward(engine, prompts):
    model = engine.target.model
    t = Target(model)
    ids = engine.encode(prompts[0])[:60]
    t.prefill(ids)
    assert len(t.ids) == len(ids) - 1
    draft = Draft.chain(torch.tensor([11, 22, 33, 44]))
    scored = t.score(ids[-1], draft)
    ref = fresh_logits(model, ids + [11, 22, 33, 44])
    torch.testing.assert_close(scored, ref[len(ids) - 1 :], atol=2e-4, rtol=1e-4)
    t.commit((0, 1))
    committed = ids + [11, 22]
    assert t.ids == committed  # the new pending token is not in the cache yet (I1)
    nxt = t.score(99, Draft.empty())
    ref = fresh_logits(model, committed + [99])
    torch.testing.assert_close(nxt[0], ref[-1], atol=2e-4, rtol=1e-4)


def test_tree_rows_and_commit_match_fresh_forward(engine, prompts):
    model = engine.target.model
    t = Target(model)
    ids = engine.encode(prompts[1])[:50]
    t.prefill(ids)
    #       root(pending) -> a(0) -> c(2) -> e(4)
    #                     -> b(1) -> d(3)
    tokens = torch.tensor([101, 202, 303, 404, 505])
    draft = Draft.from_parents(tokens, (-1, -1, 0, 1, 2))
    scored = t.score(ids[-1], draft)
    for node in range(draft.n):
        path = [int(tokens[i]) for i in draft.path_to(node)]
        ref = fresh_logits(model, ids + path)
        torch.testing.assert_close(scored[node + 1], ref[-1], atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(scored[0], fresh_logits(model, ids)[-1], atol=2e-4, rtol=1e-4)
    t.commit((1, 3))  # keep b, d: a gather, not a truncation
    committed = ids + [202, 404]
    assert t.ids == committed
    nxt = t.score(7, Draft.chain(torch.tensor([8])))
    ref = fresh_logits(model, committed + [7, 8])
    torch.testing.assert_close(nxt, ref[-2:], atol=2e-4, rtol=1e-4)


def test_prefill_reuses_common_prefix_and_recovers_from_interrupted_step(engine, prompts):
    model = engine.target.model
    t = Target(model)
    ids = engine.encode(prompts[2])[:40]
    t.prefill(ids)
    t.score(ids[-1], Draft.chain(torch.tensor([5, 6, 7])))  # a step interrupted before commit
    other = ids[:30] + [9, 10]
    t.prefill(other)
    assert t.ids == other[:-1]
    out = t.score(other[-1], Draft.empty())
    torch.testing.assert_close(out[0], fresh_logits(model, other)[-1], atol=2e-4, rtol=1e-4)


def test_a_growing_layer_shows_its_first_length_slots_and_refuses_a_replaced_view():
    """keys/values are computed when read (models/cache.py): they must follow every change of
    length (update, crop, keep, the lean forwards' advance), and a caller replacing them (as the
    mixin's offload or beam reordering would) is told, not silently ignored."""
    import pytest

    from specdec.models import cache as kv

    c = kv.new_cache(1, 2)
    layer = c.layers[0]
    assert layer.keys is None
    k = torch.arange(1 * 2 * 3 * 4, dtype=torch.float32).view(1, 2, 3, 4)
    keys, values = layer.update(k, -k)
    assert torch.equal(keys, k) and torch.equal(values, -k) and layer.capacity >= 3
    kv.truncate(c, 1)
    assert torch.equal(layer.keys, k[:, :, :1]) and torch.equal(layer.values, -k[:, :, :1])
    kv.advance(c, 2)  # a lean forward wrote slots 1 and 2 in place
    assert torch.equal(layer.keys, k)
    kv.keep(c, 0, [2, 0])
    assert torch.equal(layer.keys, k[:, :, [2, 0]])
    with pytest.raises(TypeError, match="views of its buffer"):
        layer.keys = k
