"""The end of text drawn, and a question in Generate sent with the chat template (issue 52, item 2).

Fast: a token whose id is the model's end of text is drawn as a visible mark in its fate's colour,
with a title that explains it; the tiny model's run on the real engine draws it where it stops.
Slow (SmolLM2): "Why is the sky blue?" typed as plain text ends at once, and the page says to send
it as a chat message; sent as one, the chat template opens the assistant's turn and the model
answers.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
from specdec.core.events import Piece  # noqa: E402
from specdec.demo import render as R  # noqa: E402
from specdec.demo.handlers import Handlers  # noqa: E402
from specdec.demo.runs import DemoSession  # noqa: E402
from tests.test_demo_chat import smol  # noqa: E402, F401  (the module's SmolLM2 fixture)


def test_the_end_of_text_is_a_visible_explained_token_in_its_fate_colour():
    end = Piece(2, "", "plain", 3, 0)
    span = R.piece_span(end, end=True)
    assert R.END_MARK in span and 'data-end="true"' in span and "end of text" in span and "title=" in span
    assert "sd-plain" in span
    rejected = R.piece_span(Piece(2, "", "rejected", 3, 1), end=True)
    assert "sd-rejected" in rejected and R.END_MARK in rejected  # a drafted end the target refused
    t = R.Transcript(eos_ids=frozenset({2}))
    t.pieces = [Piece(5, "x", "plain", 1, 0), end]
    assert t.spans().count(R.END_MARK) == 1
    assert R.END_MARK in R.legend_html()


def test_the_tiny_models_run_draws_its_end_where_it_stops(backend):
    h, session = Handlers(backend), DemoSession()
    assert h.eos and h.eos == frozenset(backend.engine.eos_ids)
    t = R.Transcript(eos_ids=h.eos)
    t.pieces = [Piece(next(iter(h.eos)), "", "bonus", 1, 2)]
    assert R.END_MARK in t.spans() and "sd-bonus" in t.spans()
    with pytest.raises(Exception, match="chat template"):  # the tiny model has none
        next(h.generate("x = 1\n", "none", "auto", 0.0, 1.0, 4, 0, session, True))


@pytest.mark.slow
def test_a_question_needs_the_chat_template_and_gets_it(smol):  # noqa: F811
    engine, backend = smol
    h, session = Handlers(backend), DemoSession()
    *_, (tokens, _, _) = h.generate("Why is the sky blue?", "none", "auto", 0.0, 1.0, 8, 0, session)
    assert R.END_MARK in tokens["body"] and "Chat tab" in tokens["status"]  # ended at once, said why
    *_, (tokens, _, _) = h.generate("Why is the sky blue?", "none", "auto", 0.0, 1.0, 8, 0, session, True)
    assert "im_start|&gt;assistant" in tokens["prompt"] and "Chat tab" not in tokens["status"]
    assert tokens["body"].count("sd-tok") == 8  # it answers (8 tokens, the limit)
