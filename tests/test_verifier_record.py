"""The verifier's record (issue 17, step-through): every test's p, q, min(1, p/q), the uniform u, the
verdict and the residual's top tokens, made by specdec/core/verify.py itself and carried in the step events.
Recording must not change a single draw."""

from __future__ import annotations

import pytest
import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.tree import Draft
from specdec.core.verify import residual, verify


def _random_case(seed: int, n: int = 4, vocab: int = 6):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(n + 1, vocab, generator=g) * 2, -1)
    q = torch.softmax(torch.randn(n, vocab, generator=g) * 2, -1)
    tokens = [int(torch.multinomial(q[i], 1, generator=g)) for i in range(n)]
    return Draft.chain(tokens, q), p


@pytest.mark.parametrize("seed", range(40))
def test_recording_changes_no_draw_and_agrees_with_the_verdict(seed):
    draft, p = _random_case(seed)
    plain = verify(draft, p, torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed)
    rec = verify(draft, p, g, record=True)
    assert (rec.path, rec.token, rec.bonus, rec.tested) == (plain.path, plain.token, plain.bonus, plain.tested)
    assert plain.record is None and len(rec.record) == len(rec.tested)
    r = p[0]
    for check, (node, r_x, q_x, ok) in zip(rec.record, rec.tested):
        assert (check.node, check.p, check.q, check.accepted) == (node, r_x, q_x, ok)
        assert check.ratio == pytest.approx(min(1.0, r_x / q_x))
        if check.u is None:
            assert check.ratio in (0.0, 1.0)
        else:
            assert 0.0 <= check.u < 1.0 and check.accepted == (check.u < check.ratio)
        if not ok:  # a chain: the residual after rejecting node i is norm(max(r - q_i, 0))
            r = residual(r, draft.q[node])
            top = torch.topk(r, len(check.residual))
            assert [t for t, _ in check.residual] == top.indices.tolist()
            assert [pr for _, pr in check.residual] == pytest.approx(top.values.tolist())
        else:
            r = p[node + 1]


@pytest.mark.slow
def test_step_events_carry_the_record_only_when_asked_and_the_tokens_do_not_change(engine):
    sampling = SamplingParams(temperature=0.8, seed=3)
    spec = GenerateSpec(method="draft", k=4, max_new_tokens=48, sampling=sampling)
    plain = engine.generate("def fibonacci(n):", spec)
    rec = engine.generate("def fibonacci(n):", GenerateSpec(**{**spec.__dict__, "verifier_record": True}))
    assert rec.tokens == plain.tokens
    assert all(ev.verifier is None for ev in plain.events) and all(ev.verifier for ev in rec.events)
    rejected_seen = 0
    for ev in rec.events:
        nodes = ev.verifier["nodes"]
        assert len(nodes) == ev.draft_size
        for pc in ev.pieces:  # each tested piece's p and q are the record's numbers at its test
            if pc.kind in ("accepted", "rejected"):
                node = next(n for n in nodes if n["depth"] == pc.position and n["verdict"] == pc.kind)
                assert (node["p_test"], node["q"]) == (pc.p, pc.q) and node["token"] == pc.token_id
                if pc.kind == "rejected":
                    rejected_seen += 1
                    assert node["residual"] and node["u"] is not None
        last = [pc for pc in ev.pieces if pc.emitted][-1]
        assert ev.verifier["final"]["token"] == last.token_id or ev.stop is not None
    assert rejected_seen > 0
    assert "verifier" in rec.events[0].to_dict() and "verifier" not in plain.events[0].to_dict()
