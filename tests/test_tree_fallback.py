"""specdec/proposers/fallback.py: auto k = 0 for the tree methods, decided from injected rates and a
fake clock (no timing is asserted), and on the shipped Medusa and EAGLE heads the plain steps it
chooses keep the greedy tokens while an explicit k is never overridden."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.proposers.fallback import PlainFallback, ProbeBackoff, drafting_pays


def test_drafting_pays_when_tau_exceeds_the_step_cost_in_plain_steps() -> None:
    assert drafting_pays(2.7, 1.6)  # EAGLE on code: 2.7 tokens for 1.6 plain steps' time
    assert not drafting_pays(1.8, 2.1)  # Medusa at alpha 0.13: slower than plain
    assert not drafting_pays(1.5, 1.5)  # a tie goes to the plain step
    assert not drafting_pays(1.6, 1.5, margin=0.1) and drafting_pays(1.7, 1.5, margin=0.1)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _run(fb: PlainFallback, clock: Clock, steps: int, draft_s: float, draft_tokens: int, k="auto") -> list[bool]:
    """Drive ``steps`` steps of one request: a drafting step takes draft_s and commits
    draft_tokens, a plain one takes 1.0 and commits one token. Returns the plain choices."""
    ctx = SimpleNamespace(tokens=[1, 2, 3], spec=SimpleNamespace(k=k), budget=100)
    out = []
    for _ in range(steps):
        plain = fb.plain(ctx)
        out.append(plain)
        if not plain:
            fb.drafted(5)
        clock.t += 1.0 if plain else draft_s
        ctx.tokens.extend([7] * (1 if plain else draft_tokens))
    return out


def test_a_tree_that_does_not_pay_falls_back_to_plain_steps_with_probes_backing_off() -> None:
    clock = Clock()
    fb = PlainFallback(clock=clock, probe_every=4, probe_max=16)
    got = _run(fb, clock, 60, draft_s=2.0, draft_tokens=1)  # 1 token for 2 plain steps' time
    assert got[:2] == [False, True]  # draft first, then one plain step to measure it
    probes = [i for i, plain in enumerate(got) if not plain and i > 0]
    assert probes == [4, 12, 28, 44]  # after 3 plain steps (the measuring one first), then 8, 16, 16 (the cap)
    assert fb.rates() == pytest.approx((1.0, 2.0))


def test_probe_backoff_doubles_after_each_unpaid_probe_and_resets_when_drafting_pays() -> None:
    b = ProbeBackoff(base=2, cap=8)
    probes = [step for step in range(40) if b.drafts(step == 30)]  # drafting pays once, at step 30
    assert probes == [1, 5, 13, 21, 29, 30, 32, 36]  # gaps 4, 8, 8 (the cap); pays at 30: every 2, then 4
    fixed = ProbeBackoff(base=4, cap=4)
    assert [fixed.drafts(False) for _ in range(8)] == [False, False, False, True] * 2


def test_a_tree_that_pays_keeps_drafting_and_explicit_k_is_never_overridden() -> None:
    clock = Clock()
    fb = PlainFallback(clock=clock)
    got = _run(fb, clock, 12, draft_s=1.5, draft_tokens=3)
    assert got == [False, True] + [False] * 10  # one plain step measured, then drafting pays
    clock2 = Clock()
    fixed = PlainFallback(clock=clock2)
    assert not any(_run(fixed, clock2, 12, draft_s=5.0, draft_tokens=1, k=6))


def test_steps_of_another_request_are_not_counted() -> None:
    clock = Clock()
    fb = PlainFallback(clock=clock)
    ctx = SimpleNamespace(tokens=[1, 2], spec=SimpleNamespace(k="auto"), budget=10)
    fb.plain(ctx)
    fb.drafted(3)
    clock.t += 100.0  # the next call belongs to a new request: a new token list
    fb.plain(SimpleNamespace(tokens=[1, 2, 3, 4], spec=ctx.spec, budget=10))
    assert fb.sums[True] == [0.0, 0.0, 0.0]


def test_the_probe_schedule_spans_requests() -> None:
    """Short requests (an editor's completions) still probe: the plain steps since the last draft
    are counted across requests, as the rates the probe measures are kept across them."""
    clock = Clock()
    fb = PlainFallback(clock=clock, probe_every=4)
    _run(fb, clock, 3, draft_s=2.0, draft_tokens=1)  # draft, plain, plain: a run of 2
    assert fb.plain_run == 2
    got = _run(fb, clock, 4, draft_s=2.0, draft_tokens=1)  # a new token list: a new request
    assert got == [True, False, True, True] and fb.plain_run == 2  # the 4th plain step in all probes
    assert fb.probe.every == 8  # that probe did not pay: the next waits 8 plain steps


@pytest.mark.parametrize("method", ["medusa", "eagle"])
def test_plain_steps_keep_the_tokens(engine, prompts, method) -> None:
    prop = engine.proposers[method]
    spec = lambda m, k="auto": GenerateSpec(method=m, k=k, max_new_tokens=40, sampling=SamplingParams(temperature=0.0))
    want = engine.generate(prompts[1], spec("none")).tokens
    saved = prop.state.fallback  # the solo request's state (fallback.TreeState)
    prop.state.fallback = fb = PlainFallback(probe_every=4)
    fb.rates = lambda: (1.0, 50.0)  # a drafting step measured as 50 plain steps for 1 token
    fb.sums[True][0] = 1.0
    try:
        res = engine.generate(prompts[1], spec(method))
    finally:
        prop.state.fallback = saved
    assert res.tokens == want
    assert res.stats.auto_plain >= res.stats.steps // 2 > 0 and res.stats.drafted > 0  # probes draft
    fixed = engine.generate(prompts[1], spec(method, 4))
    assert fixed.tokens == want and fixed.stats.auto_plain == 0
