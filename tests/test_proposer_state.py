"""Per-request proposer states and the one proposal per method (issue 39): a state drafts as the
solo request would whoever else shares the call, the shared proposer keeps no request's state, and
the batch's rows hold states of their own (docs/architecture.md, "One proposal per method").
"""

from __future__ import annotations

import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.proposer import Context
from specdec.proposers.draft import DraftState
from specdec.proposers.fallback import PlainFallback
from specdec.proposers.medusa import MedusaState
from specdec.serving.backend import Request
from specdec.serving.batch import BatchBackend


def _draft_ctx(tokens, k=3) -> Context:
    spec = GenerateSpec(method="draft", k=k, confidence=0.0, sampling=SamplingParams(0.0))  # always k tokens
    return Context(list(tokens), spec, 16, k, None, None, 1.0)


def test_draft_states_without_a_ragged_forward_draft_on_their_own_caches(engine, prompts):
    """The solo form (no slots) drafts any state through the draft's own forward, swapping the
    runner's cache per state: each row drafts what the solo request drafts from the same tokens on a
    fresh cache, and the solo request's cache comes back intact."""
    prop = engine.proposers["draft"]
    ids = [engine.encode(p)[:40] for p in prompts[:3]]
    try:
        prop.propose(_draft_ctx(ids[0]))  # the solo state's cache now holds ids[0] and two drafted tokens
        held = list(prop.state.ids)
        rows = [DraftState(), DraftState()]
        got = prop.form.propose(rows, [_draft_ctx(ids[1]), _draft_ctx(ids[2])])
        assert prop.live is rows[1] and rows[0].cache is not None  # the runner holds the last row's cache
        for st, t, d in zip(rows, ids[1:], got):
            assert d.n == 3 and st.ids[: len(t)] == t and len(st.ids) == len(t) + 2
        assert prop.behind(ids[0]) == 1 and prop.state.ids == held  # the solo cache is back: only the pending token
        assert prop.live is prop.state
        for t, d in zip(ids[1:], got):
            prop.state.forget()  # a fresh cache, fed as the row's was (no other document's kept one)
            prop.kept.clear()
            ref = prop.propose(_draft_ctx(t))
            assert torch.equal(ref.tokens, d.tokens)
    finally:
        prop.state.forget()


def test_draft_rows_of_a_draft_without_a_ragged_forward_keep_their_solo_tokens(engine, prompts, monkeypatch):
    from specdec.models.ragged import RaggedLlama

    monkeypatch.setattr(RaggedLlama, "supports", staticmethod(lambda model: False))
    specs = [GenerateSpec(method="draft", max_new_tokens=16, k=3, sampling=SamplingParams(t, seed=i))
             for i, t in enumerate((0.0, 0.8, 0.0))]  # fmt: skip
    chosen = prompts[20:23]
    solo = [engine.generate(p, s).tokens for p, s in zip(chosen, specs)]
    b = BatchBackend(engine, max_batch=3, max_queue=4)
    try:
        assert b._proposers.batched["draft"].model is None  # no ragged forward: one by one
        handles = [b.submit(Request(p, s)) for p, s in zip(chosen, specs)]
        assert [[t for ev in h for t in ev.token_ids] for h in handles] == solo
        assert len(b._states.free["draft"]) == 3 and engine.proposers["draft"].state not in b._states.free["draft"]
    finally:
        assert b.shutdown(30)
    prop = engine.proposers["draft"]
    assert engine.generate(chosen[0], specs[0]).tokens == solo[0]
    assert prop.live is prop.state and prop.runner.length == len(prop.state.ids)  # its cache back, in step


def test_medusa_states_fall_back_on_their_own_and_one_state_runs_the_solo_tree(engine, prompts):
    medusa = engine.proposers["medusa"]
    ids = engine.encode(prompts[2])[:30]
    engine.target.prefill(ids)
    hidden = engine.target.hidden
    ctx = lambda: Context(list(ids), GenerateSpec(method="medusa"), 64, None, None, hidden)  # noqa: E731
    plain, drafting = MedusaState(), MedusaState()
    plain.fallback = fb = PlainFallback()
    fb.rates = lambda: (1.0, 50.0)  # measured: a drafting step costs 50 plain steps for one token
    fb.sums[True][0] = 1.0
    got = medusa.form.propose([plain, drafting], [ctx(), ctx()])
    assert got[0].n == 0 and plain.chose_plain  # auto k chose a plain step for this state only
    assert got[1].n > 0 and not drafting.chose_plain
    solo = medusa.tree(ctx())
    assert torch.equal(got[1].tokens, solo.tokens) and got[1].parents == solo.parents
    solo_state = (medusa.state.chose_plain, medusa.state.fallback)  # whatever earlier tests left there
    one = medusa.form.propose([MedusaState()], [ctx()])[0]  # a batch of one: the solo computation
    assert torch.equal(one.tokens, solo.tokens)
    assert (medusa.state.chose_plain, medusa.state.fallback) == solo_state  # the solo state untouched


def test_eagle_rows_take_slots_and_give_them_back_keeping_their_measurements(engine, prompts):
    from specdec.proposers.eagle.batch import BatchEagle

    eagle = engine.proposers["eagle"]
    form = BatchEagle(eagle, 2, engine.context + 1)
    ids = engine.encode(prompts[3])[:30]
    engine.target.prefill(ids)
    ctx = Context(list(ids), GenerateSpec(method="eagle", k=8), 64, 8, None, engine.target.hidden)
    a, b = form.new_state(), form.new_state()
    assert a.kv is None and a.slot is None  # no cache until it drafts
    drafts = form.propose([a, b], [ctx, ctx])
    assert {a.slot, b.slot} == {0, 1} and a.ids == ids and a.kv.length == len(ids) - 1
    solo = eagle.tree(ctx, type(a)(eagle.decoder.new_kv(64)))  # the solo computation on a fresh cache
    for d in drafts:  # batched kernels, the solo tree (as tests/test_batch_eagle.py checks on more)
        assert torch.equal(d.tokens, solo.tokens) and d.parents == solo.parents
    fallback, slot = a.fallback, a.slot
    form.release(a)
    assert a.slot is None and a.kv is None and a.ids == [] and a.fallback is fallback and form.free == [slot]
    form.propose([a], [ctx])  # taken again: the slot given back
    assert a.slot == slot and a.ids == ids
    assert eagle.state.slot is None and eagle.state.kv is not None  # the solo state never takes a slot
