"""The draft's cache follows each prompt at prefill, and a request's first drafting step sees the
target's step time measured by earlier requests (so auto k is measured from the first step)."""

from __future__ import annotations

from specdec.core.config import GenerateSpec
from specdec.core.proposer import Context


def _greedy(method: str, n: int, heal: str = "") -> GenerateSpec:
    return GenerateSpec(method=method, max_new_tokens=n, heal=heal)


def test_a_request_that_never_drafts_still_brings_the_draft_cache_along(engine, prompts):
    draft = engine.proposer("draft")
    ids = engine.encode(prompts[3])
    engine.generate(engine.encode(prompts[0]), _greedy("draft", 8))  # the draft's cache: another prompt
    engine.generate(ids, _greedy("draft", 1))  # one token: no drafting step, only the prefill
    assert draft.ids == ids and draft.runner.length == len(ids)


def test_a_few_tokens_behind_are_left_to_the_first_drafting_step(engine, prompts):
    from specdec.proposers import draft_warm

    draft = engine.proposer("draft")
    ids = engine.encode(prompts[4])
    engine.generate(ids[:-3], _greedy("draft", 1))  # warm up to three tokens before
    assert draft.ids == ids[:-3]
    engine.generate(ids, _greedy("draft", 1))  # 3 behind: no extra draft forward at prefill
    assert draft.ids == ids[:-3] and 0 < draft_warm.behind(draft, ids) <= draft_warm.WARM_MIN


def test_warm_draft_keeps_greedy_output(engine, prompts):
    ids = engine.encode(prompts[5])
    plain = engine.generate(ids, _greedy("none", 32)).tokens
    engine.generate(ids[:-3], _greedy("draft", 1))  # warm on a shorter prefix
    assert engine.generate(ids, _greedy("draft", 32)).tokens == plain
    assert engine.generate(ids, _greedy("draft", 32)).tokens == plain  # and fully warm


def test_first_drafting_step_sees_an_earlier_requests_target_time(engine, prompts, monkeypatch):
    draft = engine.proposer("draft")
    engine.generate(engine.encode(prompts[1]), _greedy("draft", 8))
    assert engine.target_ms and engine.target_ms > 0
    seen: list[Context] = []
    real = draft.propose
    monkeypatch.setattr(draft, "propose", lambda ctx: (seen.append(ctx), real(ctx))[1])
    engine.generate(engine.encode(prompts[2]), _greedy("draft", 8))
    assert seen and seen[0].target_ms is not None  # before: None, so the first step drafted a blind 4


def test_catch_up_goes_through_the_proposer_interface_only():
    """draft_warm calls the public hooks (``behind``, ``catch_up``) and nothing else; a proposer
    without them (prompt lookup, none) is left alone."""
    from specdec.core.proposer import NoDraft
    from specdec.proposers import draft_warm

    class Hooks:
        def __init__(self, lag: int) -> None:
            self.lag, self.fed = lag, []

        def behind(self, tokens):
            return self.lag

        def catch_up(self, tokens):
            self.fed.append(list(tokens))
            return self.lag

    far, near = Hooks(draft_warm.WARM_MIN + 1), Hooks(draft_warm.WARM_MIN)
    draft_warm.after_prefill(far, [1, 2, 3])
    draft_warm.after_prefill(near, [1, 2, 3])
    assert far.fed == [[1, 2, 3]] and near.fed == []
    draft_warm.after_prefill(NoDraft(), [1, 2, 3])  # no hooks: nothing to call
    assert draft_warm.behind(NoDraft(), [1, 2, 3]) == 0


def test_draft_model_catch_up_is_public_and_reports_what_it_fed(engine, prompts):
    draft = engine.proposer("draft")
    ids = engine.encode(prompts[6])
    draft.catch_up(ids[:5])
    assert draft.behind(ids) == len(ids) - 5
    assert draft.catch_up(ids) == len(ids) - 5
    assert draft.ids == ids and draft.runner.length == len(ids)
    assert draft.behind(ids) == 1  # the last token is the pending one: always fed again


def test_switching_documents_keeps_the_drafts_cache_per_document(engine, prompts):
    """A, B, A: the draft continues from A's kept cache (a few tokens fed, not the whole prompt),
    the output is the target's, and dropping A's prompt (didClose) drops its kept cache."""
    draft = engine.proposer("draft")
    a, b = (engine.encode(p) for p in prompts[7:9])
    want = engine.generate(a, _greedy("none", 12)).tokens
    fed: list[int] = []
    forward = draft.runner.forward

    def counting(tokens):
        fed.append(len(tokens))
        return forward(tokens)

    draft.kept.clear()
    draft.runner.forward = counting
    try:
        engine.generate(a, _greedy("draft", 12))
        draft.kept.clear()  # what earlier tests left
        engine.generate(b, _greedy("draft", 12))  # A's cache is put aside
        assert len(draft.kept) == 1
        fed.clear()
        assert engine.generate(a, _greedy("draft", 12)).tokens == want
        assert fed and fed[0] <= 8, fed  # A's prompt was not fed again (it is > 100 tokens)
        assert len(draft.kept) == 1 and draft.drop_prefix(b) == 1 and len(draft.kept) == 0
    finally:
        del draft.runner.forward
        draft.kept.clear()
