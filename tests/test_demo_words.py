"""Issue 32, item 10: the demo's numbers and words a teacher hit (pure functions; one race with Stop).

A steadier tokens/s with its spread, the sentence where tau and speed disagree, why a race's
speedup can exceed tau, p and q at temperature 0 said as the argmax rule (inspector and step
table), every symbol of the stream in the legend, Race after Stop, and the small text defects."""

from __future__ import annotations

import html
import json
import re

import pytest

from specdec.core.events import Piece, Stats, StepEvent
from specdec.demo import race as RC
from specdec.demo import render as R
from specdec.demo import speed as SP
from specdec.demo import stats as S
from specdec.demo import wording as W
from specdec.paths import ASSETS


def _ev(step: int, pieces: list[Piece], drafted: int, ms: dict[str, float]) -> StepEvent:
    st = Stats(steps=step, target_forwards=step, emitted=2 * step)
    return StepEvent(step, tuple(pieces), st, ms, drafted)


def _run(step_ms: list[float], drafted: int = 0, propose: float = 0.0) -> R.Transcript:
    """One token a step, each step's forward taking the given milliseconds."""
    evs = [
        _ev(i, [Piece(i, "x", "plain", i, 0)], drafted, {"propose": propose, "score": ms, "verify": 0.0})
        for i, ms in enumerate(step_ms, 1)
    ]
    return R.Transcript().extend(evs)


def test_steady_rate_leaves_out_warm_up_and_gives_its_spread():
    t = _run([400.0, 90.0] + [10.0] * 30 + [20.0] * 2)  # a slow first forward, then 100 tok/s
    rate = SP.steady_rate(t)
    assert rate.median == pytest.approx(100.0) and rate.low <= 100.0 <= rate.high and rate.windows >= 4
    assert SP.rate_text(rate).startswith("100.0 tok/s (")
    assert SP.steady_rate(_run([10.0] * 4)) is None  # too short to say
    cards = R.stats_html(t.stats, "100.0", "(95.0-101.0); whole run 50.0")
    assert "100.0" in cards and "(95.0-101.0); whole run 50.0" in cards and "middle half" in cards


def test_tau_and_speed_disagree_says_why_from_the_step_timings():
    plain = SP.Split("none", 50, 0.0, 10.0, 0.5, 1.0, 1.0, 95.0)
    draft = SP.Split("draft (k=4)", 25, 18.0, 12.0, 1.0, 4.2, 2.0, 64.0)
    text = SP.disagree_note(draft, [plain])
    assert "draft (k=4) has the higher tau (2.00 vs 1.00) but the lower speed (64.0 vs 95.0" in text
    assert "mostly the draft (+18.0 ms a step)" in text and "verify forward of 4.2 rows 12.0" in text
    rows = SP.Split("lookup (k=4)", 25, 0.1, 30.0, 1.0, 5.0, 2.0, 60.0)
    assert "mostly the verify forward's extra rows (+20.0 ms" in SP.disagree_note(rows, [plain])
    agree = SP.Split("lookup (k=4)", 25, 0.1, 11.0, 1.0, 5.0, 2.0, 150.0)
    assert SP.disagree_note(agree, [plain]) == ""
    assert "Speed ~ tau / step time: 2.00 tokens per target forward, 31.0 ms a step" in SP.time_note(draft)


def test_race_speedup_above_tau_is_explained_with_measured_steps():
    base = SP.Split("none", 24, 0.0, 12.0, 0.4, 1.0, 1.0, 80.0)
    method = SP.Split("draft (k=4)", 10, 1.0, 9.0, 0.5, 5.0, 2.4, 200.0)
    text = SP.above_tau_note(2.6, base, method)
    assert "Why the speedup (2.60x) is above tau (2.40" in text and "12.4 ms a step" in text
    assert "verify forward of 5.0 rows (9.0 ms) cost less than plain decoding's one-row forward (12.0 ms)" in text
    assert SP.above_tau_note(2.0, base, method) == ""  # below tau: nothing to explain


def test_temperature_0_says_the_argmax_rule_not_p_0_q_1():
    ev = _ev(
        1,
        [
            Piece(10, "def", "accepted", 1, 1, 1.0, 1.0),
            Piece(11, " f", "rejected", 1, 2, 0.0, 1.0),
            Piece(12, " g", "recovered", 1, 2),
        ],
        3,
        {},
    )
    info = [
        html.unescape(m) for m in re.findall(r'data-info="([^"]*)"', R.Transcript(greedy=True).extend([ev]).spans())
    ]
    assert 'rejected: the target\'s argmax is " g", not this token' in info[1]
    assert "accepted: the target's argmax" in info[0] and all("p=" not in i for i in info)
    assert "p=0.000 q=1.000" in R.Transcript().extend([ev]).spans()  # at T > 0 the numbers stay


def test_step_table_at_temperature_0_says_the_argmax_rule():
    from specdec.demo import step as STEP

    nodes = [
        {"node": 0, "token": 5, "text": " a", "depth": 1, "parent": -1, "p": 1.0, "q": 1.0, "verdict": "accepted",
         "p_test": 1.0, "ratio": 1.0, "u": None},
        {"node": 1, "token": 6, "text": " b", "depth": 2, "parent": 0, "p": 0.0, "q": 1.0, "verdict": "rejected",
         "p_test": 0.0, "ratio": 0.0, "u": None, "residual": []},
    ]  # fmt: skip
    rec = {"nodes": nodes, "final": {"token": 7, "text": " c", "kind": "recovered", "from": []}}
    ev = StepEvent(1, (), Stats(), {}, 2, verifier=rec)
    panel = html.unescape(STEP.panel_html(ev, greedy=True))
    assert 'rejected: the target\'s argmax is " c", not this token' in panel
    assert "0 (not the target's argmax)" in panel and "0.0000" not in panel.split("<details>")[0]
    assert "u >= min(1, p/q)" in html.unescape(STEP.panel_html(ev))  # at T > 0 the draw is shown


def test_every_symbol_the_stream_draws_is_in_the_legend():
    legend = html.unescape(R.legend_html())
    drawn = set()
    for text in ("\n       ", " ", "\t", "", "a\n"):
        drawn |= set(R.visible_text(Piece(1, text, "rejected", 1, 1)))
    drawn |= set(R.prompt_tail("1\n2\n3\n4\n5\n6")[0])
    symbols = {ch for ch in drawn if not ch.isalnum() and not ch.isspace()}
    assert symbols == {"\u23ce", "\u2423", "\u21e5", "\u2205", "\u2026"}
    for sym in symbols:
        assert f"<code>{sym}</code>" in legend
    assert "\u24237 = seven spaces" in legend


def test_race_sides_say_stopped_with_what_was_measured():
    assert RC.side_speed([], False) == "timing ..."
    cut = RC.side_speed([], True, 7, 41.5)
    assert cut.startswith("stopped by you: no finished run") and "7 tokens at 41.5 tokens/s (not counted)" in cut
    assert RC.side_speed([50.0], True) == "stopped by you: 50.0 tokens/s (median of 1: 50)"
    assert "1 token " in RC.side_speed([], True, 1, 9.0)


def test_small_text_defects():
    assert W.range_text(8, 8) == "8" and W.range_text(0, 8) == "0 to 8"
    assert W.plural(1, "token") == "1 token" and W.plural(2, "token") == "2 tokens"
    t = _run([5.0, 5.0], drafted=8)
    note = S.method_note("draft", 8, 0.0, t)
    assert " 8 drafted per step" in note and "8 to 8" not in note and "of 2 steps" in note
    assert "(1 token)" in RC.race_verdict([4], [4], 0.0)[1]


def test_example_buttons_are_named_by_what_they_show():
    from specdec.demo.examples import example_prompts

    labels = [name for name, _, _ in example_prompts()]
    rows = [json.loads(ln) for ln in (ASSETS / "prompts" / "code.jsonl").read_text().splitlines() if ln.strip()]
    files = {r["source"].split("/")[-1] for r in rows}
    assert not files & set(labels) and not any(lb.endswith(".py") for lb in labels)
    assert W.example_label("numpy/x.py", "def compress(a):\n    return") == "compress() in numpy (code)"
    assert (
        W.example_label("stdlib/y.py", "x = 1\n    # explain this\n")
        == "# explain this · the standard library (comment)"
    )


@pytest.mark.slow
def test_stop_in_race_leaves_no_side_timing(backend):
    pytest.importorskip("gradio")
    from specdec.demo.handlers import Handlers
    from specdec.demo.runs import DemoSession

    h, session = Handlers(backend), DemoSession()
    updates = []
    for u in h.race("def fibonacci(n):\n", "draft", 4, 0.0, 1.0, 48, 0, 3, session):
        updates.append(u)
        if "run 2/3" in u[2]:
            session.stop.set()  # as the Stop button does
    left, right, verdict = updates[-1]
    for side in (left, right):
        assert "timing ..." not in side["head"] and "stopped by you" in side["head"]
    assert "Stopped by you after 1 paired run." in verdict
