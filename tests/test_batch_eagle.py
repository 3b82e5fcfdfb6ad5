"""EAGLE rows batched (specdec/proposers/eagle/batch.py) on the shipped models: every EAGLE row of a step in
ONE layer forward per tree level, each row's tree equal to the solo proposer's tree for the same
committed text and hidden states, and each request's tokens and seeded samples equal to its solo run.
"""

from __future__ import annotations

import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.proposers.eagle import EagleState
from specdec.serving.backend import Request
from specdec.serving.batch import BatchBackend
from tests.seeded import fixed_k


def _spec(method: str, n: int, temperature: float = 0.0, seed: int | None = None, **kw) -> GenerateSpec:
    return GenerateSpec(method=method, max_new_tokens=n, sampling=SamplingParams(temperature, seed=seed), **kw)


def _solo_tree(engine, ctx):
    """The engine's EAGLE tree for ``ctx`` on a fresh state of its own (the solo computation)."""
    base = engine.proposers["eagle"]
    return base.tree(ctx, EagleState(base.decoder.new_kv(64)))


def test_eagle_rows_share_one_forward_per_level_and_grow_their_solo_trees(engine, prompts):
    b = BatchBackend(engine, max_batch=4, max_queue=8)
    batched, calls, seen = b._proposers.batched["eagle"], [], []
    forward, propose = batched._forward, batched.propose

    def counted(f, e, pos, at, slots, lens, groups):
        calls.append(len(slots))
        return forward(f, e, pos, at, slots, lens, groups)

    def recorded(states, contexts):
        drafts = propose(states, contexts)
        if len(states) > 1:  # the batched path; keep what a solo proposer needs to redo each tree
            seen.extend((list(ctx.tokens), ctx.hidden.clone(), ctx, d) for ctx, d in zip(contexts, drafts))
        return drafts

    batched._forward, batched.propose = counted, recorded
    try:
        specs = [_spec("eagle", 20 + 3 * i, 0.0 if i % 2 == 0 else 0.8, seed=i, k=fixed_k("eagle")) for i in range(4)]
        chosen = prompts[4:8]
        assert len(chosen) == 4
        solo = [engine.generate(p, s).tokens for p, s in zip(chosen, specs)]
        handles = [b.submit(Request(p, s)) for p, s in zip(chosen, specs)]
        got = [[t for ev in h for t in ev.token_ids] for h in handles]
        assert got == solo
        assert max(calls) == 4  # all four rows in one forward
        depth = engine.proposers["eagle"].depth
        assert len(calls) <= depth * b.steps  # a sync and at most depth - 1 levels per step, not per row
    finally:
        assert b.shutdown(30)
    assert sorted(batched.free) == list(range(b.slots))  # every slot returned
    assert len(seen) >= 8
    for tokens, hidden, ctx, draft in seen:
        ref = _solo_tree(engine, type(ctx)(tokens, ctx.spec, ctx.budget, ctx.k_max, None, hidden))
        assert torch.equal(ref.tokens, draft.tokens) and ref.parents == draft.parents


def test_eagle_rows_batched_with_other_methods_equal_solo(engine, prompts):
    methods = ("eagle", "none", "eagle", "draft", "eagle", "lookup")
    specs = [_spec(m, 16 + 2 * i, 0.0 if i % 3 else 0.7, seed=60 + i, k=fixed_k(m)) for i, m in enumerate(methods)]
    chosen = prompts[8:14]
    assert len(chosen) == len(methods)
    solo = [engine.generate(p, s).tokens for p, s in zip(chosen, specs)]
    b = BatchBackend(engine, max_batch=6, max_queue=8)
    try:
        handles = [b.submit(Request(p, s)) for p, s in zip(chosen, specs)]
        assert [[t for ev in h for t in ev.token_ids] for h in handles] == solo
    finally:
        assert b.shutdown(30)
