"""Auto-k: acceptance is inferred from the committed tokens, and k follows the theory's argmax."""

from __future__ import annotations

from specdec.core.theory import best_k
from specdec.proposers.draft import AcceptanceTracker


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


def test_auto_k_chooses_a_plain_step_when_drafting_does_not_pay():
    from specdec.proposers.draft import PROBE_EVERY, choose_k

    assert choose_k(0.9, 0.05, 8) >= 5  # a good cheap draft drafts long
    assert choose_k(0.2, 0.5, 8) == 0  # alpha below the break-even c: plain decoding
    assert choose_k(0.55, 0.5, 8) >= 1  # just above it: k = 1 pays
    assert choose_k(0.0, 0.01, 8) == 0
    # a run of plain steps probes with one token every PROBE_EVERY steps so alpha stays measured
    runs = [choose_k(0.2, 0.5, 8, plain_run=n) for n in range(PROBE_EVERY)]
    assert runs == [0] * (PROBE_EVERY - 1) + [1]


def test_a_request_state_backs_off_its_probes_while_drafting_does_not_pay():
    from specdec.proposers.draft import PROBE_EVERY, choose_k
    from specdec.proposers.fallback import PROBE_MAX, ProbeBackoff

    probe, run, probes = ProbeBackoff(), 0, []
    for step in range(200):
        k = choose_k(0.2, 0.5, 8, run, probe)
        probes += [step] if k else []
        run = 0 if k else run + 1
    assert PROBE_EVERY == 8 and probes == [7, 23, 55, 119, 183]  # after 7 plain steps, then 16, 32, 64, 64
    assert PROBE_MAX == 64 and choose_k(0.9, 0.05, 8, 0, probe) >= 5 and probe.every == PROBE_EVERY  # pays: reset


def test_a_new_request_starts_its_own_run_of_plain_steps():
    from types import SimpleNamespace

    from specdec.proposers.batch_draft import BatchDraft
    from specdec.proposers.draft import DraftModel, DraftState

    prop = DraftModel.__new__(DraftModel)  # the k decision only: no model is run for plain steps
    prop.state, prop.verify_cost, prop.vocab = DraftState(), 0.1, None
    prop.form = BatchDraft(prop, 0, 0)  # the solo form: propose is its batch of one
    prop.step_ms = 1.0
    prop.tracker.accepted, prop.tracker.rejections = 0.0, 10.0  # alpha 0: drafting never pays
    spec = SimpleNamespace(k="auto", confidence=None)

    def step(tokens):
        return prop.propose(SimpleNamespace(tokens=tokens, spec=spec, budget=50, k_max=4, target_ms=1.0))

    first = [1, 2]
    for _ in range(3):
        assert step(first).n == 0 and prop.chose_plain
    assert prop.plain_run == 3
    step([1, 2, 3])  # another request's token list
    assert prop.plain_run == 1


def test_engine_counts_auto_plain_steps_and_keeps_the_tokens(engine, prompts):
    from specdec.core.config import GenerateSpec, SamplingParams

    p = engine.proposers["draft"]
    spec = lambda m, k="auto": GenerateSpec(method=m, k=k, max_new_tokens=40, sampling=SamplingParams(temperature=0.0))
    want = engine.generate(prompts[1], spec("none")).tokens
    saved = p.step_ms
    p.step_ms = 1e6  # a draft forward that costs far more than the target's: drafting never pays
    try:
        res = engine.generate(prompts[1], spec("draft"))
    finally:
        p.step_ms = saved
    assert res.tokens == want
    assert res.stats.auto_plain >= res.stats.steps // 2 > 0
    assert res.stats.to_dict()["auto_plain"] == res.stats.auto_plain
    fixed = engine.generate(prompts[1], spec("draft", 3))  # an explicit k is never overridden
    assert fixed.tokens == want and fixed.stats.auto_plain == 0 and fixed.stats.drafted > 0


def test_the_k_rule_state_is_per_request_and_shared_by_solo_and_batch(engine):
    """One ``DraftState`` per request (draft_k.py): the solo proposer holds one, every batch row
    its own from the method's batch form, which drafts with the solo proposer's weights, and both
    paths choose k through it."""
    from types import SimpleNamespace

    from specdec.proposers.draft import DraftState
    from specdec.serving.batch.propose import Proposers
    from specdec.serving.batch.rows import States

    solo, forms = engine.proposers["draft"], Proposers(engine, 2, 64).batched
    states = States(forms)
    row = states.take("draft")
    assert isinstance(solo.state, DraftState) and isinstance(row, DraftState) and row is not solo.state
    assert forms["draft"].proposer is solo and solo.form.proposer is solo  # one proposer's weights
    assert row.slot is None and row.ids == []  # no cache until it drafts
    states.give("draft", row)
    assert states.take("draft") is row  # recycled when a row ends
    assert states.take("none") is None  # no batch form: no state, the proposer is shared
    st = DraftState()
    spec = SimpleNamespace(k="auto", confidence=None)
    ctx = SimpleNamespace(tokens=[1, 2], spec=spec, budget=50, k_max=4, target_ms=None)
    assert st.begin(ctx, 0.1) == 4 and not st.chose_plain  # nothing measured yet: FIRST_K
    st.end(ctx, [5, 6, 7, 8])
    ctx.tokens.extend([5, 6, 9])  # two of four accepted
    st.timed(2.0)
    st.timed(1.0)
    assert st.step_ms == 0.8 * 2.0 + 0.2 * 1.0
    before = st.tracker.accepted
    st.begin(ctx, 0.1)
    assert st.tracker.accepted == 0.9 * before + 2
