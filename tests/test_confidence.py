"""The target's log-probability of each emitted token (specdec/core/confidence.py) and the confidence
filter built on it (specdec/lsp/quiet.py): rows read at the right place, the same figure for every
method, and the filter's rule."""

from __future__ import annotations

import math

import pytest
import torch

from specdec.core.confidence import emitted_logp
from specdec.core.config import GenerateSpec
from specdec.core.tree import Draft
from specdec.lsp.completion import Options, OptionsError
from specdec.lsp.quiet import confidence, unsure


def test_each_token_is_read_at_its_parents_row():
    logits = torch.randn(5, 11)
    lp = torch.log_softmax(logits, -1)
    tree = Draft.from_parents([3, 4, 5, 6], [-1, -1, 1, 2])  # node 2 under node 1, node 3 under node 2
    got = emitted_logp(logits, tree, (1, 2, 3), 7, 4)
    assert got == pytest.approx([float(lp[0, 4]), float(lp[2, 5]), float(lp[3, 6]), float(lp[4, 7])])
    assert emitted_logp(logits, tree, (1,), 9, 1) == pytest.approx([float(lp[0, 4])])  # cut at EOS / room
    assert emitted_logp(logits, Draft.empty(), (), 2, 1) == pytest.approx([float(lp[0, 2])])


@pytest.mark.slow
def test_every_method_reports_the_same_logp_for_the_same_tokens(engine, prompts):
    ids = engine.encode(prompts[2])
    runs = {}
    for method in ("none", "lookup", "draft"):
        events = engine.generate(ids, GenerateSpec(method=method, max_new_tokens=24)).events
        assert all(len(ev.logp) == len(ev.token_ids) for ev in events)
        runs[method] = ([t for ev in events for t in ev.token_ids], [x for ev in events for x in ev.logp])
    tokens, logp = runs["none"]
    assert all(x <= 0 for x in logp) and len(logp) == len(tokens)
    for method, (toks, lps) in runs.items():
        assert toks == tokens, method
        assert lps == pytest.approx(logp, abs=1e-3), method  # wider forwards round a little differently
    healed = engine.generate(ids[:-1], GenerateSpec(method="none", max_new_tokens=4, heal=" ")).events
    assert healed[0].logp == () and all(len(ev.logp) == len(ev.token_ids) for ev in healed[1:])


def test_confidence_is_the_geometric_mean_over_the_shown_characters():
    spans = [(0, 0, math.log(0.01)), (0, 3, math.log(0.5)), (3, 2, math.log(0.125)), (5, 4, math.log(0.001))]
    assert confidence(spans, 5) == pytest.approx(0.25)  # the empty piece and the token past the cut: left out
    assert confidence(spans, 4) == pytest.approx(0.25)  # a token that starts inside the text counts
    assert confidence([], 5) is None and confidence(spans, 0) is None
    assert unsure("abcde", spans, 0.3) and not unsure("abcde", spans, 0.2)
    assert not unsure("abcde", spans, 0.0)  # off
    assert not unsure("abcde", [], 0.9)  # nothing reported: not unsure


def test_min_confidence_is_validated():
    assert Options().updated({"min_confidence": 0.25}, ("none",)).min_confidence == 0.25
    for bad in (-0.1, 1, 1.5, True, "0.2"):
        with pytest.raises(OptionsError):
            Options().updated({"min_confidence": bad}, ("none",))
