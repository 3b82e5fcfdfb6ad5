"""Pure logic of the loop: stop handling inside a step, the statistics' definitions."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from specdec.core.events import Stats
from specdec.core.step import emitted
from specdec.core.tree import Draft
from specdec.core.verify import Verdict

EOS = 0


class FakeDetok:
    def push(self, t: int) -> str:
        return f"<{t}>"

    def alone(self, t: int) -> str:
        return f"[{t}]"


def test_eos_inside_an_accepted_run_stops_there():
    draft = Draft.chain(torch.tensor([5, EOS, 7]))
    verdict = Verdict(
        path=(0, 1, 2), token=9, bonus=True, tested=((0, 1.0, 1.0, True), (1, 1.0, 1.0, True), (2, 1.0, 1.0, True))
    )
    engine = SimpleNamespace(eos_ids={EOS})
    pieces, new, stop = emitted(engine.eos_ids, draft, verdict, 1, FakeDetok(), room=100)
    assert new == [5, EOS] and stop == "eos"
    assert [pc.kind for pc in pieces] == ["accepted", "accepted"]


def test_length_limit_cuts_inside_a_step_and_rejections_are_shown():
    draft = Draft.chain(torch.tensor([5, 6, 7]))
    verdict = Verdict(path=(0,), token=8, bonus=False, tested=((0, 0.9, 1.0, True), (1, 0.1, 1.0, False)))
    engine = SimpleNamespace(eos_ids={EOS})
    pieces, new, stop = emitted(engine.eos_ids, draft, verdict, 3, FakeDetok(), room=2)
    assert new == [5, 8] and stop == "length"
    assert [(pc.kind, pc.text, pc.position) for pc in pieces] == [
        ("accepted", "<5>", 1),
        ("rejected", "[6]", 2),
        ("recovered", "<8>", 2),
    ]
    pieces, new, stop = emitted(engine.eos_ids, draft, verdict, 3, FakeDetok(), room=1)
    assert new == [5] and stop == "length"


def test_stats_definitions():
    s = Stats()
    s.record(drafted=[1, 2, 3], tested=[1, 2], accepted=[1], emitted=2)
    s.record(drafted=[1, 2, 3], tested=[1, 2, 3], accepted=[1, 2, 3], emitted=4)
    s.record(drafted=[], tested=[], accepted=[], emitted=1)
    assert s.alpha == 4 / 6
    assert s.tau == 7 / 3
    assert s.alpha_per_position == [1.0, 0.5, 0.5]
    assert s.conditional_alpha_per_position == [1.0, 0.5, 1.0]
    d = s.to_dict()
    assert d["tau"] == s.tau and d["alpha_per_position"] == [1.0, 0.5, 0.5]
