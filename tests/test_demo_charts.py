"""The Generate view's stream value and inline SVG charts (specdec/demo/stream.py, specdec/demo/charts.py):
pure functions on hand-made step events. The page's script appends only what a value adds to the
one before it, so the stream's body must only ever grow within one run; the charts must count what
the tested statistics (specdec/demo/stats.py) count."""

from __future__ import annotations

import re

import pytest

from specdec.core.events import Piece, Stats
from specdec.demo import charts as C
from specdec.demo import render as R
from specdec.demo import stats as S
from specdec.demo import stream as ST
from tests.test_demo_render import _event, _steps


def test_stream_body_is_every_span_in_order_and_only_grows_within_a_run():
    t, run = R.Transcript(prompt="a\nb\nc\nd\ne\n"), ST.new_run()
    bodies = []
    for ev in _steps():
        t.add(ev)
        bodies.append(ST.stream_value(t, "running", run)["body"])
    assert all(b.startswith(a) for a, b in zip(bodies, bodies[1:]))  # what the page appends is the rest
    assert bodies[-1] == "".join(R.piece_span(pc) for pc in t.pieces)
    v = ST.stream_value(t, "done", run)
    assert v["run"] == run and v["status"] == "done" and v["prompt"].startswith("\u2026")  # the prompt's tail
    assert ST.new_run() != run  # a new run replaces the stream
    t.batch_rows = 3
    assert "3 requests in one target forward" in ST.stream_value(t, "done", run)["status"]
    assert ST.stream_value(R.Transcript(), "", run)["body"] == ""


def test_the_page_script_and_template_keep_the_shape_the_inspector_reads():
    for cls in ("sd-stream", "sd-body", "sd-prompt", "sd-status", "sd-head"):
        assert f'class="{cls}"' in ST.TEMPLATE
    assert "`" not in ST.TEMPLATE and "${" not in ST.TEMPLATE and "{{" not in ST.TEMPLATE  # gradio's templating
    assert "insertAdjacentHTML" in ST.SCRIPT and "watch('value'" in ST.SCRIPT


def _rects(svg: str, attr: str = "data-series") -> list[dict[str, str]]:
    return [dict(re.findall(r'(data-[\w-]+)="([^"]*)"', r)) for r in re.findall(r"<rect [^>]*>", svg) if attr in r]


def test_step_chart_counts_accepted_rejected_and_untested_per_step():
    t = R.Transcript().extend(_steps())
    got = {(int(r["data-step"]), r["data-series"]): int(r["data-n"]) for r in _rects(C.steps_svg(t))}
    want = {(r.step, r.series): r.tokens for r in S.step_frame(t).itertuples() if r.tokens}
    assert got == want == {(1, "accepted"): 1, (1, "rejected"): 1, (1, "untested"): 1, (2, "accepted"): 1}
    assert "last" not in C.steps_svg(t)


def test_step_chart_keeps_a_window_of_the_last_steps_and_says_so():
    t = R.Transcript()
    for i in range(1, 61):
        t.add(_event(i, [Piece(i, "x", "accepted", i, 1, 0.5, 0.5), Piece(i, "y", "bonus", i, 2)], drafted=1))
    svg = C.steps_svg(t)
    steps = {int(r["data-step"]) for r in _rects(svg)}
    assert steps == set(range(61 - C.STEP_WINDOW, 61))
    assert f"(last {C.STEP_WINDOW} of 60 steps)" in svg
    assert svg.count("<rect") == C.STEP_WINDOW  # the cost of a redraw does not grow with the run


def test_alpha_line_ends_at_the_running_alpha():
    t = R.Transcript().extend(_steps())
    m = re.search(r'<polyline points="([^"]*)"[^>]*data-last="([\d.]+)" data-points="(\d+)"', C.alpha_svg(t))
    assert float(m.group(2)) == pytest.approx(R.alpha_frame(t).alpha.iloc[-1]) and int(m.group(3)) == 3
    assert len(m.group(1).split()) == 3


def test_position_chart_is_conditional_with_its_counts():
    st = Stats(drafted_at=[4, 4, 2], tested_at=[4, 1, 0], accepted_at=[3, 1, 0])
    svg = C.position_svg(st)
    bars = _rects(svg, "data-depth")
    assert [(b["data-depth"], b["data-accepted"], b["data-tested"]) for b in bars] == [("1", "3", "4"), ("2", "1", "1")]
    assert ">3/4<" in svg and ">1/1<" in svg and "conditional" in svg


def test_empty_charts_say_why_instead_of_drawing_axes():
    t = R.Transcript()
    t.add(_event(1, [Piece(1, "x", "plain", 1, 0)], drafted=0))  # the baseline drafts nothing
    out = C.charts_html(t)
    assert out.count("sd-chart-empty") == 3 and "<svg" not in out
    for elem in ("sd-accept-plot", "sd-alpha-plot", "sd-position-plot"):
        assert f'id="{elem}"' in out
