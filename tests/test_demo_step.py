"""Step-through (issue 17): the verifier panel shows the engine's record of each step: p, q,
min(1, p/q), u, the verdict, and the residual after a rejection, exactly as the step event has them."""

from __future__ import annotations

import os
import re

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
pytest.importorskip("gradio")
from specdec.demo import step as ST  # noqa: E402
from specdec.demo.runs import DemoSession  # noqa: E402
from specdec.demo.step_tab import StepHandlers  # noqa: E402

PROMPT = "def fibonacci(n):"
SETTINGS = ("draft", 4, 0.8, 1.0, 40, 3)  # method, k, temperature, top-p, max new tokens, seed


def rows(panel: str) -> list[dict[str, str]]:
    return [dict(re.findall(r'data-(\w+)="([^"]*)"', tr)) for tr in re.findall(r'<tr class="sd-check"([^>]*)>', panel)]


def check_panel_against_event(panel: str, event) -> None:
    got = rows(panel)
    nodes = event.verifier["nodes"]
    assert len(got) == len(nodes) == event.draft_size  # every drafted token, tested or not
    for row, node in zip(got, nodes):
        assert row["verdict"] == node["verdict"] and int(row["token"]) == node["token"]
        assert float(row["p"]) == pytest.approx(node.get("p_test", node["p"]), rel=1e-8)
        assert float(row["q"]) == pytest.approx(node["q"], rel=1e-8)
        if node["verdict"] != "untested":
            assert float(row["ratio"]) == pytest.approx(node["ratio"], rel=1e-8)
            assert (row["u"] == "") == (node["u"] is None)
            if node["u"] is not None:
                assert float(row["u"]) == pytest.approx(node["u"], rel=1e-8)


@pytest.mark.slow
def test_walk_shows_every_step_and_a_rejection_with_its_residual(backend):
    h, session = StepHandlers(backend), DemoSession()
    *_, (stream, panel) = h.start(PROMPT, *SETTINGS, session)
    walk = session.walk
    assert walk.at == 0 and len(walk.events) > 3 and all(ev.verifier for ev in walk.events)
    check_panel_against_event(panel, walk.events[0])
    seen_rejection = False
    while not walk.done:
        stream, panel = h.next(session)
        ev = walk.current
        check_panel_against_event(panel, ev)
        if any(n["verdict"] == "rejected" and n["u"] is not None for n in ev.verifier["nodes"]):
            seen_rejection = True
            bars = re.findall(r'class="sd-bar" data-token="(\d+)" data-prob="([^"]+)"', panel)
            first = next(n for n in ev.verifier["nodes"] if n["verdict"] == "rejected")
            want = [(str(t["token"]), t["prob"]) for t in first["residual"]]
            assert [b[0] for b in bars[: len(want)]] == [w[0] for w in want]
            assert [float(b[1]) for b in bars[: len(want)]] == pytest.approx([w[1] for w in want], rel=1e-5)
    assert seen_rejection
    assert f"step {len(walk.events)} of {len(walk.events)} (the end)" in stream


def test_panel_for_a_plain_step_and_before_start():
    assert "Start" in ST.panel_html(None)
    w = ST.Walk()
    assert w.next().at == -1 and ST.walk_html(w, "x") and not w.done


def test_a_rejected_rows_verdict_is_not_struck_through_only_its_token():
    """Issue 32, item 8: the whole verdict cell inherited the rejected token's line-through."""
    from types import SimpleNamespace

    node = {"node": 0, "depth": 1, "token": 7, "text": "x", "p": 0.1, "q": 0.9, "ratio": 0.11, "u": 0.5}
    rec = {"nodes": [node | {"verdict": "rejected", "residual": []}], "final": {}}
    panel = ST.panel_html(SimpleNamespace(step=1, verifier=rec))
    verdict = re.search(r'<span class="sd-verdict" style="([^"]*)">rejected', panel).group(1)
    token = re.search(r'<tr class="sd-check"[^>]*><td>1</td><td><code style="([^"]*)"', panel).group(1)
    assert "line-through" not in verdict and "line-through" in token
    assert "class='sd-record-wrap' style='overflow-x:auto" in panel  # the table scrolls inside its panel
