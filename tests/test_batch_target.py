"""BatchTarget on the shipped target: chunked prefill and per-row tree commit against fresh forwards.

A fresh forward is ``engine.target.Target`` (the single-request path) over the same tokens; the
batched logits must agree to float rounding and give the same argmax, row by row.
"""

from __future__ import annotations

import pytest
import torch

from engine.batch.target import BatchTarget
from engine.target import Target
from engine.tree import Draft

ATOL = 1e-4


@pytest.fixture(scope="module")
def pair(engine):
    return BatchTarget(engine.target.model, 3, engine.context + 1, engine.target.vocab), engine


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
