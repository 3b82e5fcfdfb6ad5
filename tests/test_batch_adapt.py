"""The load policy (pure logic) and the adaptive batch on the shipped models (still exact)."""

from __future__ import annotations

from specdec.core.config import GenerateSpec
from specdec.core.theory import expected_tokens
from specdec.serving.backend import Request
from specdec.serving.batch import BatchBackend
from specdec.serving.batch.adapt import LoadPolicy, expected_tokens_by_depth


def test_expected_tokens_is_the_geometric_run():
    assert expected_tokens(0.5, 0) == 1.0
    assert abs(expected_tokens(0.5, 2) - 1.75) < 1e-12


def test_expected_tokens_by_depth_generalises_the_geometric_run():
    for a in (0.3, 0.55, 0.9):
        for k in (0, 1, 3, 8):
            assert abs(expected_tokens_by_depth([a], [1.0], k) - expected_tokens(a, k)) < 1e-12
    assert expected_tokens_by_depth([1.0, 1.0, 0.0], [1.0], 8) == 3.0  # right for two tokens, then never
    assert expected_tokens_by_depth([1.0], [1.0, 0.5, 0.0], 8) == 2.5  # drafts of 1 or 2 tokens, all accepted


def test_bursty_chains_are_measured_per_depth():
    """Lookup-like chains: half the steps miss at the first token, half copy all 8 correctly; and a
    step without a match drafts nothing. The per-depth rates see what the i.i.d. alpha cannot."""
    p = LoadPolicy()
    for i in range(200):
        p.observe_row("lookup", *((1, 0, 8) if i % 2 else (8, 8, 8)), 0.0, 8)
    accept, share = p.depths["lookup"].rates()
    assert abs(accept[0] - 0.5) < 0.02 and min(accept[1:]) > 0.999 and min(share) > 0.999
    assert abs(p.expected("lookup", 8) - 5.0) < 0.1 and abs(p.expected("lookup", 1) - 1.5) < 0.02
    for _ in range(200):
        p.observe_row("lookup", 0, 0, 0, 0.0, 8)  # no match: nothing drafted whatever the cap
    assert max(p.depths["lookup"].rates()[1]) < 0.05
    q = LoadPolicy()
    for _ in range(50):
        q.observe_row("draft", 3, 2, 8, 0.0, 8)  # right for exactly two tokens every time
    assert abs(q.expected("draft", 2) - 3.0) < 1e-9 and abs(q.expected("draft", 8) - 3.0) < 1e-9
    for rows in (1, 4):
        for qq in (1, 9):
            q.observe_forward(rows, qq, 10.0 + rows * qq)
    assert q.choose(["draft"] * 4, 4) == 2  # no deeper draft can pay: it only widens the forward


def _policy(cost) -> LoadPolicy:
    p = LoadPolicy()
    for rows in (1, 16):
        for q in (1, 9):
            p.observe_forward(rows, q, cost(rows, q))
    return p


def test_flat_cost_and_good_drafts_draft_long():
    p = _policy(lambda rows, q: 10.0)
    for _ in range(20):
        p.observe_row("lookup", 4, 4, 4, 0.0)
    assert p.choose(["lookup"] * 4, 4) == 8


def test_a_full_batch_whose_cost_grows_with_tokens_stops_drafting():
    p = _policy(lambda rows, q: 5.0 + 2.0 * rows * q)  # compute-bound: every token costs
    for i in range(20):  # chains accepted at the first depth one step in four (alpha 0.25), never deeper
        p.observe_row("draft", *((2, 1, 4) if i % 4 == 0 else (1, 0, 4)), 1.0, 4)
    assert p.choose(["draft"] * 16, 16) == 0
    assert p.last["k"] == 0 and set(p.last["est_tok_per_ms"]) >= {0, 1, 8}


def test_unmeasured_sizes_come_from_the_fitted_line():
    p = _policy(lambda rows, q: 1.0 + rows * q)
    assert abs(p.forward_ms(4, 3) - 13.0) < 1e-6


def test_the_adaptive_batch_is_still_exact(engine, prompts):
    b = BatchBackend(engine, max_batch=4, adaptive=True)
    try:
        specs = [GenerateSpec(method=m, max_new_tokens=24) for m in ("draft", "lookup", "none", "draft")]
        handles = [b.submit(Request(p, s)) for p, s in zip(prompts[5:9], specs)]
        events = [list(h) for h in handles]
        got = [[t for ev in evs for t in ev.token_ids] for evs in events]
        assert got == [engine.generate(p, s).tokens for p, s in zip(prompts[5:9], specs)]
        caps = {ev.batch["k"] for evs in events[:2] for ev in evs}
        assert caps and None not in caps  # the policy capped every adaptive row
        assert all(ev.batch["k"] is None for ev in events[2])  # none keeps its own (empty) draft
    finally:
        b.shutdown(10)


def test_a_draft_row_under_the_policys_cap_drafts_the_cap(engine, prompts):
    """The cap is the batch's choice for the row: the draft model's own auto k must not choose
    again under it (it kept the policy from ever seeing deep drafts). The policy's choice is pinned
    here so the test does not depend on measured costs."""
    b = BatchBackend(engine, max_batch=2, adaptive=True)

    def pinned(methods, rows, k_max=8):
        b.policy.chosen = 3
        return 3

    b.policy.choose = pinned
    try:
        spec = GenerateSpec(method="draft", max_new_tokens=24, confidence=0.0)  # no early stop on q
        handles = [b.submit(Request(p, spec)) for p in prompts[5:7]]
        events = [list(h) for h in handles]
        assert [[t for ev in evs for t in ev.token_ids] for evs in events] == [
            engine.generate(p, spec).tokens for p in prompts[5:7]
        ]
        for evs in events:
            made, capped = 0, 0
            for ev in evs:
                if ev.batch["rows"] > 1:
                    assert ev.batch["k"] == 3 and ev.draft_size == min(3, 24 - made - 1), (ev.step, ev.draft_size)
                    capped += 1
                made += len(ev.token_ids)
            assert capped >= 3
    finally:
        b.shutdown(10)


def test_measured_steps_overrule_a_cost_model_that_says_drafting_pays():
    """The model estimates drafting pays (flat cost, good drafts); the realised rates of whole
    steps at this row count say plain steps gave more: the policy takes plain steps, and says so."""
    p = _policy(lambda rows, q: 10.0)
    for _ in range(20):
        p.observe_row("draft", 4, 4, 4, 0.0)
    assert p.choose(["draft"] * 16, 16) > 0 and not p.last["guard"]
    p.observe_step(16, 40, 20.0)  # a drafting step: 2 tokens per ms
    p.chosen = 0
    p.observe_step(16, 16, 5.0)  # a plain step: 3.2 tokens per ms
    assert p.choose(["draft"] * 16, 16) == 0 and p.last["guard"]
    assert p.choose(["draft"] * 8, 8) > 0  # another row count: nothing measured there yet
    ks = [p.choose(["draft"] * 4, 4) for _ in range(64)]
    assert ks.count(1) >= 2  # the drafting probe (smallest k) every EXPLORE steps


def test_the_policy_probes_plain_steps_too():
    p = _policy(lambda rows, q: 10.0)
    for _ in range(20):
        p.observe_row("lookup", 4, 4, 4, 0.0)
    ks = [p.choose(["lookup"] * 4, 4) for _ in range(64)]
    assert ks.count(0) == 2 and ks.count(8) >= 60


def test_a_batch_of_one_keeps_its_methods_own_k():
    from types import SimpleNamespace

    from specdec.serving.batch.adapt import cap_rows

    def row(method):
        return SimpleNamespace(spec=SimpleNamespace(k="auto", method=method), k_cap=3)

    p = _policy(lambda rows, q: 10.0)
    one = [row("lookup")]
    cap_rows(p, one, 1)
    assert one[0].k_cap is None and p.steps == 0  # no choice made, no probe spent
    two = [row("lookup"), row("draft")]
    cap_rows(p, two, 2)
    assert p.steps == 1 and all(r.k_cap is not None for r in two)
    cap_rows(p, two[:1], 1)
    assert two[0].k_cap is None  # rows drop to one: the cap is lifted


def test_tree_rows_draft_until_plain_steps_measure_faster_then_only_probe():
    from types import SimpleNamespace

    from specdec.serving.batch.adapt import EXPLORE, cap_rows

    def row(method, k="auto"):
        return SimpleNamespace(spec=SimpleNamespace(k=k, method=method), k_cap=None)

    p = _policy(lambda rows, q: 10.0)
    rows = [row("eagle"), row("medusa"), row("eagle", 16), row("none")]
    cap_rows(p, rows, 4)
    assert [r.k_cap for r in rows] == [None, None, None, None]  # nothing measured: their own trees
    assert p.chosen == 1 and p.last["trees"] and not p.last["guard"]
    p.observe_step(4, 12, 4.0)  # drafted steps: 3 tokens per ms
    p.chosen = 0
    p.observe_step(4, 4, 1.0)  # plain steps: 4 tokens per ms
    caps = []
    for _ in range(2 * EXPLORE):
        cap_rows(p, rows, 4)
        caps.append(rows[0].k_cap)
        assert rows[1].k_cap == rows[0].k_cap and rows[2].k_cap is None  # an explicit k is never capped
    assert caps.count(None) == 2 and caps.count(0) == 2 * EXPLORE - 2  # plain, and a drafting probe
    assert p.last["guard"]
    cap_rows(p, rows, 8)  # another row count: nothing measured there yet
    assert rows[0].k_cap is None
    p.realised[(4, True)] = 5.0  # drafting measured faster again: trees come back
    cap_rows(p, rows, 4)
    assert rows[0].k_cap is None
    mixed = [row("eagle"), row("draft")]
    for _ in range(40):  # drafts never accepted: the chain choice is plain
        p.observe_row("draft", 4, 0, 4, 5.0)
    cap_rows(p, mixed, 16)
    assert mixed[1].k_cap == 0 and mixed[0].k_cap == 0  # trees follow the chain choice
    one = [row("eagle")]
    cap_rows(p, one, 1)
    assert one[0].k_cap is None  # a batch of one keeps the method's own fallback


def test_the_adaptive_batch_with_tree_rows_is_still_exact(engine, prompts):
    b = BatchBackend(engine, max_batch=4, adaptive=True)
    try:
        specs = [GenerateSpec(method=m, max_new_tokens=24) for m in ("eagle", "medusa", "eagle", "none")]
        handles = [b.submit(Request(p, s)) for p, s in zip(prompts[9:13], specs)]
        events = [list(h) for h in handles]
        got = [[t for ev in evs for t in ev.token_ids] for evs in events]
        assert got == [engine.generate(p, s).tokens for p, s in zip(prompts[9:13], specs)]
        assert {ev.batch["k"] for evs in events[:3] for ev in evs} <= {None, 0}
    finally:
        b.shutdown(10)


def test_a_size_not_measured_yet_takes_the_nearest_measured_one_within_a_quarter():
    """A batch that drains (16 requests ending one by one) meets each size for a few steps only."""
    p = _policy(lambda rows, q: 10.0)
    for _ in range(20):
        p.observe_row("draft", 4, 4, 4, 0.0)
    p.chosen = 1
    p.observe_step(16, 40, 20.0)  # drafted: 2 tokens per ms
    p.chosen = 0
    p.observe_step(16, 16, 5.0)  # plain: 3.2 tokens per ms
    assert p.realised_at(14) == (3.2, 2.0) and p.realised_at(13) == (3.2, 2.0)
    assert p.realised_at(12) == (None, None)  # 16 is more than a quarter away from 12
    assert p.choose(["draft"] * 13, 13) == 0 and p.last["guard"]
    p.chosen = 1
    p.observe_step(13, 60, 10.0)  # measured at 13 itself: its own figures win
    p.chosen = 0
    p.observe_step(13, 13, 5.0)
    assert p.realised_at(13) == (2.6, 6.0) and p.choose(["draft"] * 13, 13) > 0
