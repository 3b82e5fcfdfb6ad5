"""Prompt lookup's auto k (specdec/proposers/lookup_k.py): the decision on injected acceptance and
cost numbers, acceptance scored from committed tokens (drafted or not), step costs from a fake
clock, and on the shipped models the plain steps it chooses keep the greedy tokens and are counted
in ``Stats.auto_plain`` (no timing is asserted)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.proposer import Context
from specdec.proposers import lookup_k
from specdec.proposers.lookup import PromptLookup
from specdec.proposers.lookup_k import PRIOR_V, PROBE_EVERY, CopyTracker, LookupAuto, choose_k, step_costs
from specdec.serving.batch.rows import States

LINEAR = [1.0 + 0.07 * n for n in range(9)]  # a missed 8-token draft costs 1.56 plain steps


def test_long_drafts_when_later_positions_are_reliable() -> None:
    bursty = [0.5] + [0.95] * 7  # a copy is often wrong at once, but right for long once it starts
    assert choose_k(bursty, LINEAR, 8) == 8
    assert choose_k([0.5] * 8, LINEAR, 8) == 3  # one i.i.d. alpha of 0.5 would stop at 3
    assert choose_k(bursty, LINEAR, 5) == 5  # never beyond the cap (the match's length)
    # a size measured expensive (a wider forward that crosses a kernel's row bucket) is avoided
    jump = [1.0, 1.02, 1.03, 1.05, 2.5, 2.5, 2.5, 2.5, 2.5]
    assert choose_k([0.9] * 8, jump, 8) == 3


def test_plain_when_no_k_pays_with_a_probe_every_probe_every_steps() -> None:
    assert choose_k([0.05] * 8, LINEAR, 8) == 0  # E(1) = 1.05 < r(1) = 1.07
    assert choose_k([0.05] * 8, [1.0] + [0.98] * 8, 8) > 0  # drafting measured cheaper than plain: it pays
    assert choose_k([0.3] * 8, [1.0, 1.4] + [1.5] * 7, 8) == 0
    runs = [choose_k([0.05] * 8, LINEAR, 8, plain_run=n) for n in range(PROBE_EVERY)]
    assert runs == [0] * (PROBE_EVERY - 1) + [1]  # the probe drafts the best k, here 1
    assert choose_k([0.05] * 8, LINEAR, 0, plain_run=PROBE_EVERY) == 0  # nothing to draft: no probe


def test_step_costs_are_a_line_fitted_to_the_measured_sizes() -> None:
    assert step_costs({}, 3) == pytest.approx([1.0 + PRIOR_V * n for n in range(4)])  # nothing timed yet
    plain = [10.0, 10.0 * 4e-3]  # ten plain steps of 4 ms
    by_size = {0: plain, 2: [5.0, 5.0 * 5e-3], 4: [5.0, 5.0 * 6e-3], 7: [1.0, 1.0]}  # r(2) 1.25, r(4) 1.5
    costs = step_costs(by_size, 8)  # size 7's one stalled step is too few to enter the fit
    assert costs == pytest.approx([1.0 + 0.125 * n for n in range(9)])
    jump = step_costs({0: plain, 1: [10.0, 0.06], 8: [10.0, 0.0768]}, 8)  # one row to two: +50%
    assert jump[1] == pytest.approx(1.5) and jump[8] == pytest.approx(1.92) and jump[4] == pytest.approx(1.68)
    one = step_costs({0: plain, 3: [10.0, 0.045]}, 4)  # one size measured: the prior slope through it
    assert one[3] == pytest.approx(1.125) and one[4] - one[3] == pytest.approx(PRIOR_V)
    cheap = step_costs({0: plain, 2: [10.0, 0.036], 6: [10.0, 0.032]}, 8)  # drafting measured cheaper
    assert cheap[1:] == pytest.approx([0.85] * 8)  # a falling line is never extrapolated: the mean


def test_one_stalled_step_counts_as_at_most_twice_the_mean() -> None:
    clock = Clock()
    auto = LookupAuto(clock=clock)
    _drive(auto, clock, [[]] * 10, lambda k: 1.0)
    before = list(auto.steps.by_size[0])
    _drive(auto, clock, [[], []], lambda k: 50.0)  # a descheduled process: one 50 s step
    b = auto.steps.by_size[0]
    assert b[1] == pytest.approx(0.9 * before[1] + 2.0 * before[1] / before[0])


def _step(tracker: CopyTracker, tokens: list[int], cont: list[int], commit: list[int]) -> str:
    state = tracker.observe(tokens)
    tracker.remember(tokens, cont, state)
    tokens.extend(commit)
    return state


def test_acceptance_is_scored_from_committed_tokens_whether_drafted_or_not() -> None:
    tr = CopyTracker(decay=1.0)
    t0 = {s: list(v) for s, v in tr.tested.items()}
    a0 = {s: list(v) for s, v in tr.accepted.items()}
    tokens = [1, 2, 3]
    assert _step(tr, tokens, [7, 8, 9], [7, 8, 5]) == "fresh"  # first step of a request
    assert _step(tr, tokens, [6, 6], [4]) == "fresh"  # the previous continuation missed at 9
    delta = lambda s, d, d0: [round(x - y, 6) for x, y in zip(d[s], d0[s])]  # noqa: E731
    assert delta("fresh", tr.tested, t0) == [1, 1, 1, 0, 0, 0, 0, 0]  # 7, 8 accepted; 9 tested and missed
    assert delta("fresh", tr.accepted, a0) == [1, 1, 0, 0, 0, 0, 0, 0]
    # a plain step (nothing drafted) measures too: [6, 6] vs the committed 4 is a miss at position 1
    assert _step(tr, tokens, [3, 3, 3], [3]) == "fresh"
    assert delta("fresh", tr.tested, t0) == [2, 1, 1, 0, 0, 0, 0, 0]
    # [3, 3, 3] matched the one token committed so far: the copy is live, the next step is in state copy
    assert _step(tr, tokens, [3, 3], [3, 3, 3]) == "copy"
    assert _step(tr, tokens, [], [1]) == "copy"  # [3, 3, 3] and [3, 3] both fully matched
    assert delta("fresh", tr.accepted, a0) == [2, 2, 1, 0, 0, 0, 0, 0]
    assert delta("copy", tr.accepted, a0) == [1, 1, 0, 0, 0, 0, 0, 0]
    assert _step(tr, tokens, [2], [2]) == "fresh"  # the previous step had no match
    tr.new_request([1])  # another request: the old one's last continuation is scored on its final tokens
    assert delta("fresh", tr.accepted, a0) == [3, 2, 1, 0, 0, 0, 0, 0]


def test_copy_state_drafts_long_where_a_fresh_match_does_not_pay() -> None:
    tr = CopyTracker(decay=1.0)
    tokens = [0]
    for i in range(20):  # 1 fresh match in 10 is right (and then for 8 tokens); live copies hold
        x = 100 + i
        for _ in range(9):
            _step(tr, tokens, [1] * 8, [x])  # a fresh match wrong at once
        _step(tr, tokens, [x] * 8, [x])  # a fresh match right at its first token: a live copy
        assert _step(tr, tokens, [x] * 8, [x] * 8) == "copy"
        _step(tr, tokens, [], [7])  # no match: the next step is fresh
    fresh, copy = tr.alphas("fresh"), tr.alphas("copy")
    assert fresh[0] < 0.15 and min(fresh[1:]) > 0.9 and min(copy) > 0.9
    costly = [1.0 + 0.15 * n for n in range(9)]
    assert choose_k(fresh, costly, 8) == 0 and choose_k(copy, costly, 8) == 8


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _drive(auto: LookupAuto, clock: Clock, conts, step_s) -> list[int]:
    """One request: each step offers ``conts[i]`` and commits a token that never matches it."""
    tokens, ks = [1, 2, 3], []
    for cont in conts:
        k = auto.choose(SimpleNamespace(tokens=tokens, spec=SimpleNamespace(k="auto"), budget=99), cont)
        auto.drafted(k)
        ks.append(k)
        clock.t += step_s(k)
        tokens.append(-1)
    return ks


def test_steps_are_timed_per_draft_size_and_a_skipped_step_is_not_one() -> None:
    clock = Clock()
    auto = LookupAuto(clock=clock)
    _drive(auto, clock, [[5] * 8, []] * 10, lambda k: 1.0 + 0.1 * k)  # no match on every other step
    by = auto.steps.by_size
    assert by[0][1] / by[0][0] == pytest.approx(1.0)
    drafted = [n for n in by if n > 0]
    assert drafted and all(by[n][1] / by[n][0] == pytest.approx(1.0 + 0.1 * n) for n in drafted)
    before = {n: list(v) for n, v in by.items()}
    ctx = SimpleNamespace(tokens=[1, 2], spec=SimpleNamespace(k="auto"), budget=9)
    auto.choose(ctx, [])
    auto.skip()  # a step ran without a call: the next interval holds two steps
    clock.t += 2.0
    ctx.tokens.extend([4, 4])
    auto.choose(ctx, [])
    assert by == before


def test_misses_that_cost_more_than_they_give_fall_back_to_plain_with_probes() -> None:
    clock = Clock()
    auto = LookupAuto(clock=clock)
    ks = _drive(auto, clock, [[5] * 8] * 60, lambda k: 1.0 + 0.2 * k)  # never right, 20% a token
    assert ks[0] > 0  # the prior drafts at first
    tail = ks[30:]
    assert tail.count(0) >= len(tail) * (PROBE_EVERY - 1) // PROBE_EVERY - 1  # plain, but for the probes
    assert any(k > 0 for k in tail)
    assert auto.chose_plain == (ks[-1] == 0)


def test_the_proposer_adapts_only_for_auto_and_a_batch_row_gets_a_state_of_its_own() -> None:
    lookup = PromptLookup()
    seq = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2]
    fixed = lookup.propose(Context(seq, GenerateSpec(method="lookup", k=8), budget=20, k_max=8))
    assert fixed.tokens.tolist() == [3, 4, 5, 6, 7, 8, 9, 10] and not lookup.chose_plain
    assert lookup.auto.steps.by_size == {} and lookup.auto.copies._tokens is None  # untouched
    lookup.auto.copies.accepted["fresh"] = [0.0] * 8  # measured: fresh matches never hold
    assert lookup.propose(Context(list(seq), GenerateSpec(method="lookup"), budget=20, k_max=8)).n == 0
    assert lookup.chose_plain
    row = States({"lookup": lookup.form}).take("lookup")  # a batch row's state, from the batch form
    assert row is not lookup.state and row.auto is not lookup.auto and not row.chose_plain
    assert row.auto.copies.alphas("fresh") == lookup.auto.copies.alphas("fresh")  # the measurements
    assert row.auto.copies._tokens is None and row.auto.steps._last is None  # not the request
    assert row.grown is not lookup.state.grown  # its own index
    row.auto.copies.accepted["fresh"][0] = 1.0
    assert lookup.auto.copies.accepted["fresh"][0] == 0.0
    drafted = lookup.form.propose([row], [Context(list(seq), GenerateSpec(method="lookup", k=8), budget=20, k_max=8)])
    assert drafted[0].tokens.tolist() == [3, 4, 5, 6, 7, 8, 9, 10] and row.grown.of is not None
    assert lookup.chose_plain and lookup.state.grown.of is not row.grown.of  # the solo state untouched


@pytest.mark.slow
def test_plain_steps_keep_the_greedy_tokens_and_are_counted(engine, prompts, monkeypatch) -> None:
    spec = lambda m, k="auto": GenerateSpec(method=m, k=k, max_new_tokens=48, sampling=SamplingParams(0.0))  # noqa: E731
    want = engine.generate(prompts[1], spec("none")).tokens
    monkeypatch.setattr(lookup_k, "step_costs", lambda by_size, cap: [1.0] + [50.0] * cap)  # drafting never pays
    res = engine.generate(prompts[1], spec("lookup"))
    assert res.tokens == want
    assert res.stats.auto_plain > 0 and res.stats.to_dict()["auto_plain"] == res.stats.auto_plain
    assert res.stats.drafted > 0  # the probes draft
    fixed = engine.generate(prompts[1], spec("lookup", 4))  # an explicit k is never overridden
    assert fixed.tokens == want and fixed.stats.auto_plain == 0 and fixed.stats.drafted > 0
    monkeypatch.undo()
    free = engine.generate(prompts[1], spec("lookup"))  # measured costs: drafting pays on this prompt
    assert free.tokens == want and free.stats.accepted > 0


def test_a_step_without_a_proposal_is_never_counted_as_auto_plain(engine, prompts, monkeypatch) -> None:
    class AlwaysPlain:
        name, chose_plain = "lookup", True

        def propose(self, ctx):
            from specdec.core.tree import Draft

            return Draft.empty()

    monkeypatch.setitem(engine.proposers, "lookup", AlwaysPlain())
    res = engine.generate(prompts[2], GenerateSpec(method="lookup", max_new_tokens=3))
    assert res.stats.steps == 3 and res.stats.auto_plain == 2  # the last step has no budget to draft


@pytest.mark.slow
@pytest.mark.parametrize("adaptive", [False, True])
def test_lookup_rows_in_a_batch_adapt_on_their_own_states_and_keep_the_tokens(engine, prompts, adaptive) -> None:
    """Each row's lookup adapts on its own copy; with the load policy its cap bounds the row's own
    choice (a cap of 0 is a step without a call, ``skip``); greedy tokens are plain decoding's."""
    from specdec.serving.backend import Request
    from specdec.serving.batch import BatchBackend

    b = BatchBackend(engine, max_batch=4, adaptive=adaptive)
    try:
        specs = [GenerateSpec(method=m, max_new_tokens=40) for m in ("lookup", "lookup", "none", "lookup")]
        handles = [b.submit(Request(p, s)) for p, s in zip(prompts[3:7], specs)]
        got = [[t for ev in h for t in ev.token_ids] for h in handles]
        want = [engine.generate(p, GenerateSpec(method="none", max_new_tokens=40)).tokens for p in prompts[3:7]]
        assert got == want
        states = b._states.free["lookup"]
        assert len(states) == 3 and engine.proposers["lookup"].state not in states
        assert len({id(s.auto) for s in states}) == 3
        assert adaptive or all(s.auto.steps.by_size for s in states)  # each timed its own steps (the
        # policy may cap every step of a row at 0 in a shared forward: nothing of its own to time)
    finally:
        b.shutdown(10)


def test_the_trace_tool_summarises_paired_rows() -> None:
    from specdec.bench.lookup_k_trace import summary, table

    ms = {"none": [10.0, 20.0, 30.0], "lookup_k8": [11.0, 22.0, 27.0], "lookup_auto": [10.0, 21.0, 27.0]}
    counts = {r: {"steps": 9, "drafted": 4, "auto_plain": 1, "identical": 3} for r in ms}
    rows = summary(ms, counts)
    assert rows["none"]["p50_vs_none"] == 1.0 and rows["lookup_k8"]["p50_vs_none"] == pytest.approx(1.1)
    assert rows["lookup_auto"]["median_pair_vs_none"] == pytest.approx(1.0)  # pairs 1.0, 1.05, 0.9
    assert rows["lookup_auto"]["sum_vs_k8"] == pytest.approx(58 / 60)
    assert "lookup_auto vs lookup_k8" in table(rows)


def test_the_ab_tool_tabulates_alternated_runs(tmp_path) -> None:
    import json

    from specdec.bench.lookup_k_ab import merge, table

    def lsp_run(name: str, lookup_ms: list[float]) -> str:
        rows = {
            "none": [{"ms": 10.0, "tokens": t, "tau": 1.0, "text": "x"} for t in (4, 20)],
            "lookup": [{"ms": ms, "tokens": t, "tau": ms / 5, "text": "x"} for ms, t in zip(lookup_ms, (4, 20))],
        }
        path = tmp_path / name
        path.write_text(json.dumps({"config": {}, "methods": {}, "rows": rows}))
        return str(path)

    merged = merge("lsp-bench", [lsp_run("m.json", [10.0, 8.0])], [lsp_run("b.json", [9.0, 6.0])])
    assert "text" not in json.dumps(merged)  # compact: the times and lengths only
    lines = table(merged).splitlines()
    assert lines[2] == "| main | 1 | 0.90 | 0.90 | 0.90 | 0.80 | 1.00 |"
    assert lines[3] == "| branch | 1 | 0.75 | 0.75 | 0.75 | 0.60 | 0.90 |"
    assert lines[4] == "main: lookup's median tau 1.80, 0% accept nothing"  # taus 2.0 and 1.6
