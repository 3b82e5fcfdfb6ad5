"""The honest race (issue 17, defect 2): repeats by default, sides alternating, median and spread,
a warning when the spread contains 1x, none against none refused. The pure parts
(specdec/demo/race.py) and the handler on the shipped models through the real backend."""

from __future__ import annotations

import os

import pytest

from specdec.core.config import ConfigError
from specdec.demo import race as RC

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def test_sides_alternate_which_runs_first():
    assert RC.race_plan(3) == [(0, "base"), (0, "method"), (1, "method"), (1, "base"), (2, "base"), (2, "method")]
    assert RC.DEFAULT_REPEATS >= 3


def test_speedups_are_paired_and_summarised_with_their_spread():
    ups = RC.speedups([100.0, 50.0, 100.0], [200.0, 150.0, 210.0])
    assert ups == pytest.approx([2.0, 3.0, 2.1])
    sm = RC.summary(ups)
    assert sm.median == pytest.approx(2.1) and sm.spread == pytest.approx(1.0) and sm.conclusive
    assert "spread 2.00x to 3.00x" in sm.sentence() and "Warning" not in sm.sentence()


def test_a_spread_larger_than_the_difference_is_a_warning():
    sm = RC.summary([1.4, 0.9, 1.1])  # the four identical medusa races of the issue looked like this
    assert not sm.conclusive and "Warning" in sm.sentence() and "cannot tell" in sm.sentence()
    one = RC.summary([3.4])
    assert not one.conclusive and "no spread" in one.sentence()


@pytest.mark.parametrize(
    "ups, verdict",
    [
        ([1.32, 1.64, 2.14], "faster"),  # the draft race: a wide spread, every run faster
        ([0.55, 0.7, 0.98], "slower"),
        ([1.01, 3.0], "faster"),
        ([0.99, 1.2, 1.3], None),  # one paired run slower: the interval contains 1
        ([1.0, 1.5], None),
    ],
)
def test_the_verdict_is_whether_the_interval_contains_1(ups, verdict):
    sm = RC.summary(ups)
    text = sm.sentence()
    assert sm.conclusive == (verdict is not None)
    if verdict is None:
        assert "cannot tell" in text and "contains 1x" in text
    else:
        assert f"the method is {verdict} than the baseline" in text and "cannot tell" not in text


def test_none_against_none_is_refused():
    with pytest.raises(ConfigError, match="noise"):
        RC.check_race("none")
    RC.check_race("draft")


@pytest.mark.slow
def test_race_handler_reports_median_spread_and_streams_both_sides(backend):
    gr = pytest.importorskip("gradio")
    from specdec.demo.examples import example_prompts
    from specdec.demo.handlers import Handlers
    from specdec.demo.runs import DemoSession

    h, session = Handlers(backend), DemoSession()
    with pytest.raises(gr.Error, match="noise"):
        next(h.race("x = 1\n", "none", "auto", 0.0, 1.0, 8, 0, 3, session))
    updates = list(h.race(example_prompts()[0][1], "draft", 4, 0.0, 1.0, 24, 0, 3, session))
    left, right, verdict = updates[-1]
    assert "median of 3 paired runs" in verdict and "spread" in verdict
    assert "identical, token for token (24 tokens)" in verdict
    assert 'data-runs="3"' in left["head"] and 'data-runs="3"' in right["head"]  # app/demo_stream values
    assert left["run"] != right["run"] and 'data-kind="accepted"' in right["body"]
    live = [u for u in updates if "run 1/3" in u[2]]
    assert len(live) >= 2  # the first run streamed more than one update
    assert session.runs[-1].speedup is not None
