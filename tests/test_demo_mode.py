"""The teaching mode (issue 52, item 1): "show me" fixes k and drafts on every step, "fastest" is auto
k; the run says what its mode cost. Pure parts on hand-made steps, then the real engine: in show me
mode the tiny model's draft drafts k tokens on every step at temperature 0 and 0.8."""

from __future__ import annotations

from specdec.core.events import Piece, Stats, StepEvent
from specdec.demo import mode as M
from specdec.demo import render as R
from specdec.demo import speed as SP
from specdec.demo.runs import make_spec, run_to_end


def test_mode_and_k_stay_in_step():
    assert M.mode_of("auto") == M.FASTEST and M.mode_of(4) == M.SHOW and M.mode_of("2") == M.SHOW
    assert M.k_of(M.FASTEST, "3") == "auto"
    assert M.k_of(M.SHOW, "auto") == str(M.SHOW_K) and M.k_of(M.SHOW, "6") == "6"
    assert M.confidence_for(3) == 0.0 and M.confidence_for("auto") > 0


def _event(step: int, drafted: int, accepted: int, ms: dict[str, float]) -> StepEvent:
    """A step that drafted ``drafted`` tokens and kept ``accepted`` (tau = accepted + 1)."""
    pieces = [Piece(10 + i, "a", "accepted", step, i + 1) for i in range(accepted)]
    pieces.append(Piece(99, "b", "bonus" if accepted == drafted else "recovered", step, accepted + 1))
    stats = Stats(steps=step, target_forwards=step, emitted=step * (accepted + 1), drafted=step * drafted)
    return StepEvent(step, tuple(pieces), stats, ms, drafted)


def _transcript(drafted: int, accepted: int, ms: dict[str, float], n: int = 8) -> R.Transcript:
    return R.Transcript().extend(_event(i + 1, drafted, accepted, ms) for i in range(n))


def test_cost_is_measured_against_a_plain_run_when_there_is_one():
    show = _transcript(4, 1, {"propose": 4.0, "score": 12.0, "verify": 1.0})
    text = M.cost_text("draft", 4, show)
    assert "show me (k=4)" in text and "estimated" in text and "Race" in text
    plain = SP.split(_transcript(0, 0, {"propose": 0.0, "score": 10.0, "verify": 1.0}), "none")
    measured = M.cost_text("draft", 4, show, [plain])
    assert "measured" in measured and "11.0 ms" in measured and "17.0 ms" in measured
    assert f"{2 * 11.0 / 17.0:.2f}x" in measured  # tau 2 x plain step / this step
    assert M.cost_text("draft", 4, R.Transcript()) == ""
    assert 'data-mode="fastest"' in M.cost_html("draft", "auto", show)


def test_show_me_drafts_k_tokens_every_step_on_the_real_engine(backend):
    """A fixed k from the page is show me: the draft's confidence stop is off, so every step drafts
    exactly k (or, at the end, the room left under max_new_tokens less the step's own token)."""
    for temperature in (0.0, 0.8):
        spec = make_spec(backend, "draft", "4", temperature, 1.0, 24, 3)
        assert spec.k == 4 and spec.confidence == 0.0
        events = run_to_end(backend, "def fibonacci(n):\n", spec)
        before = [0] + [ev.stats.emitted for ev in events[:-1]]
        sizes = [(ev.draft_size, min(4, 24 - 1 - n)) for ev, n in zip(events, before)]
        assert len(sizes) > 3 and all(got == want for got, want in sizes), sizes  # k, or the room left
        kinds = {pc.kind for ev in events[:3] for pc in ev.pieces}
        assert "accepted" in kinds or "rejected" in kinds, kinds
    assert make_spec(backend, "draft", "auto", 0.0, 1.0, 8, 0).confidence > 0  # fastest keeps the stop
