"""The batched proposers on the shipped models: the ragged lean draft forward against the
single-request lean draft, one draft forward per drafting position for all draft rows, and draft /
Medusa rows batched together still giving each request its solo tokens and seeded samples.
"""

from __future__ import annotations

import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.models.lean import LeanLlama
from specdec.models.ragged import RaggedLlama
from specdec.serving.backend import Request
from specdec.serving.batch import BatchBackend
from tests.seeded import fixed_k


def _spec(method: str, n: int, temperature: float = 0.0, seed: int | None = None, **kw) -> GenerateSpec:
    return GenerateSpec(method=method, max_new_tokens=n, sampling=SamplingParams(temperature, seed=seed), **kw)


def test_ragged_rows_give_the_lean_drafts_logits(engine, prompts):
    """Rows of different lengths in one forward, then one token each in non-contiguous slots."""
    dm = engine.draft_model
    ragged, lean = RaggedLlama(dm, 6, engine.context + 1), LeanLlama(dm, engine.context + 1)
    seqs = [engine.encode(p)[: 40 + 17 * i] for i, p in enumerate(prompts[:4])]

    def solo(ids):
        lean.truncate(0)
        return lean.forward(ids).float()

    got = ragged.forward([(s, ids, 0) for s, ids in enumerate(seqs)])
    for s, ids in enumerate(seqs):
        assert torch.allclose(got[s], solo(ids), atol=1e-4)
    picked = (0, 2, 3)
    got = ragged.forward([(s, [11, 12], len(seqs[s])) for s in picked])
    for b, s in enumerate(picked):
        ref = solo(seqs[s] + [11, 12])
        assert torch.allclose(got[b], ref, atol=1e-4) and int(got[b].argmax()) == int(ref.argmax())


def test_draft_rows_share_one_forward_per_drafting_position(engine, prompts):
    b = BatchBackend(engine, max_batch=4, max_queue=8)
    calls = []
    model = b._proposers.batched["draft"].model
    forward = model.forward
    model.forward = lambda rows: (calls.append(len(rows)), forward(rows))[1]
    try:
        k = 3
        specs = [_spec("draft", 24, 0.0 if i % 2 else 0.8, seed=i, k=k) for i in range(4)]
        solo = [engine.generate(p, s).tokens for p, s in zip(prompts[30:34], specs)]
        handles = [b.submit(Request(p, s)) for p, s in zip(prompts[30:34], specs)]
        got = [[t for ev in h for t in ev.token_ids] for h in handles]
        assert got == solo
        assert max(calls) == 4  # all four draft rows in one forward
        assert len(calls) <= k * b.steps  # at most k forwards per step, not k per row
    finally:
        assert b.shutdown(30)
    assert b._proposers.batched["draft"].free and sorted(b._proposers.batched["draft"].free) == list(range(b.slots))


def test_medusa_and_draft_rows_batched_with_others_equal_solo(engine, prompts):
    methods = ("medusa", "draft", "medusa", "none", "draft", "eagle", "medusa", "lookup")
    specs = [_spec(m, 12 + 2 * i, 0.0 if i % 3 else 0.7, seed=40 + i, k=fixed_k(m, 2)) for i, m in enumerate(methods)]
    chosen = prompts[32:40]
    solo = [engine.generate(p, s).tokens for p, s in zip(chosen, specs)]
    b = BatchBackend(engine, max_batch=8, max_queue=8)
    try:
        handles = [b.submit(Request(p, s)) for p, s in zip(chosen, specs)]
        assert [[t for ev in h for t in ev.token_ids] for h in handles] == solo
    finally:
        assert b.shutdown(30)


def test_the_batch_draft_runs_the_solo_drafts_weights(engine):
    """The ragged forward runs the single-request draft's fused weights, so the precision
    calibration sets on them (fast/lowp.py) is the batch rows' too, not only solo rows'."""
    from specdec.serving.batch.propose import Proposers

    solo = engine.proposers["draft"].lean
    ragged = Proposers(engine, 2, 64).batched["draft"].model
    assert solo is not None and ragged.layers is solo.layers and ragged.head is solo.head
