"""BatchTarget on the shipped target: chunked prefill and per-row tree commit against fresh forwards.

Each test runs on both of the batch target's forwards ("hf", "lean"). A fresh forward is
``engine.target.Target`` (the single-request path) over the same tokens; the
batched logits must agree to float rounding and give the same argmax, row by row.
"""

from __future__ import annotations

import pytest
import torch

from specdec.core.tree import Draft
from specdec.models.batch_target import BatchTarget
from specdec.models.target import Target

ATOL = 1e-4


@pytest.fixture(scope="module", params=["hf", "lean"])
def pair(engine, request):
    """Both forwards of the batch target (transformers' decoder; the lean ragged rows)."""
    t = engine.target
    bt = BatchTarget(t.model, 3, engine.context + 1, t.vocab, lean=t.lean, head=t.head)
    bt.use(request.param)
    return bt, engine


def _fresh(engine, ids: list[int]) -> torch.Tensor:
    t = Target(engine.target.model, engine.context, engine.target.vocab)
    t.prefill(ids)
    return t.score(ids[-1], Draft.empty())[0]


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    assert torch.allclose(a, b, atol=ATOL), float((a - b).abs().max())
    assert int(a.argmax()) == int(b.argmax())


def test_chunked_prefill_gives_the_logits_of_a_fresh_forward(pair, prompts):
    bt, engine = pair
    ids = engine.encode(prompts[3])
    assert len(ids) > 12
    bt.free(0)
    calls = 0
    while not bt.prefill(0, ids, 5):
        calls += 1
    assert calls >= 2  # it really was chunked
    got = bt.score([(ids[-1], Draft.empty()), None, None])[0][0]
    _close(got, _fresh(engine, ids))


def test_rows_prefilled_together_each_give_a_fresh_forwards_logits(pair, prompts):
    bt, engine = pair
    rows = [engine.encode(p) for p in (prompts[6], prompts[7][-80:], prompts[8])]
    for s in range(3):
        bt.free(s)
    while not all(bt.prefill_many(list(enumerate(rows)), 16)):
        pass
    got = bt.score([(ids[-1], Draft.empty()) for ids in rows])
    for s, ids in enumerate(rows):
        _close(got[s][0], _fresh(engine, ids))


def test_each_row_commits_its_own_tree_path(pair, prompts):
    """Three rows of different lengths, each with its own tree; commit a different path per row;
    the next logits of every row equal a fresh forward over that row's committed tokens."""
    bt, engine = pair
    rows = [engine.encode(p) for p in prompts[:3]]
    for s, ids in enumerate(rows):
        bt.free(s)
        while not bt.prefill(s, ids, 64):
            pass
    trees = [
        Draft.from_parents([11, 12, 13, 14], [-1, -1, 0, 2]),
        Draft.chain([21, 22, 23]),
        Draft.from_parents([31, 32, 33, 34, 35], [-1, 0, -1, 2, 2]),
    ]
    paths = [(1,), (0, 1), (2, 4)]  # a second root; a chain prefix; a deeper branch
    logits = bt.score([(ids[-1], d) for ids, d in zip(rows, trees)])
    for s, ids in enumerate(rows):
        _close(logits[s][0], _fresh(engine, ids))
        bt.commit(s, paths[s])
    committed = [ids + [int(d.tokens[i]) for i in path] for ids, d, path in zip(rows, trees, paths)]
    bonus = 7  # the verifier's extra token: the next pending one
    nxt = bt.score([(bonus, Draft.empty()) for _ in committed])
    for s, c in enumerate(committed):
        assert bt.ids[s] == c
        assert bt.hidden(s).shape[0] == len(c)  # hidden rows kept in step with the cache
        _close(nxt[s][0], _fresh(engine, c + [bonus]))


def test_a_moved_row_keeps_its_cache(pair, prompts):
    bt, engine = pair
    ids = engine.encode(prompts[5])
    for s in range(3):
        bt.free(s)
    while not bt.prefill(2, ids, 64):
        pass
    bt.move(2, 0)
    assert bt.ids[2] == [] and bt.cache.lengths[2] == 0
    _close(bt.score([(ids[-1], Draft.empty())])[0][0], _fresh(engine, ids))


def test_a_lone_tree_row_among_idle_slots_scores_as_a_fresh_tree_forward(pair, prompts):
    """One row with a tree while the other slots take no part (the lean path's one-row body with
    the row's own additive mask); every node's logits equal the single-request target's."""
    bt, engine = pair
    ids = engine.encode(prompts[4])
    for s in range(3):
        bt.free(s)
    while not bt.prefill(1, ids, 64):
        pass
    tree = Draft.from_parents([41, 42, 43, 44], [-1, 0, -1, 2])
    got = bt.score([None, (ids[-1], tree), None])
    assert got[0] is None and got[2] is None
    t = Target(engine.target.model, engine.context, engine.target.vocab)
    t.prefill(ids)
    want = t.score(ids[-1], tree)
    assert got[1].shape == want.shape
    for a, b in zip(got[1], want):
        _close(a, b)


def test_short_and_long_rows_in_one_forward_each_give_a_fresh_forwards_logits(pair, prompts):
    """Rows fed 4 and 64 tokens per forward (the lean path attends to them in two groups, short
    and long, sharing one pass over the weights); every row's logits equal a fresh forward's."""
    bt, engine = pair
    rows = [engine.encode(p) for p in (prompts[9], prompts[10], prompts[11])]
    for s in range(3):
        bt.free(s)
    while not all(bt.prefill_many(list(enumerate(rows)), [4, 64, 64])):
        pass
    got = bt.score([(ids[-1], Draft.empty()) for ids in rows])
    for s, ids in enumerate(rows):
        _close(got[s][0], _fresh(engine, ids))


def test_a_prefill_chunk_folded_into_the_scoring_forward(pair, prompts):
    """``step``: two running rows score while a third row's chunk is fed in the same forward; the
    running rows' logits and, once its prefill is done, the newcomer's equal fresh forwards."""
    bt, engine = pair
    rows = [engine.encode(p) for p in (prompts[12], prompts[13], prompts[14])]
    for s in range(3):
        bt.free(s)
    for s in (0, 1):
        while not bt.prefill(s, rows[s], 64):
            pass
    feeds = bt.chunks([(2, rows[2])], 40)
    assert len(feeds[2]) == 40
    got = bt.step([(rows[0][-1], Draft.empty()), (rows[1][-1], Draft.chain([5, 6]))], feeds)
    assert got[2] is None and bt.ids[2] == rows[2][:40]
    _close(got[0][0], _fresh(engine, rows[0]))
    _close(got[1][0], _fresh(engine, rows[1]))
    while not bt.prefill(2, rows[2], 64):
        pass
    _close(bt.score([None, None, (rows[2][-1], Draft.empty())])[2][0], _fresh(engine, rows[2]))
