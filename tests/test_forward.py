"""The one decision of which code computes the target's forward (specdec/models/forward.py), and
that the target changes it only by replacing its ``Forward`` whole."""

from __future__ import annotations

import pytest

from specdec.models.forward import ROWS, SHORT_ROWS, Forward, default_rows, kernel


def test_kernel_table():
    hf, lean = Forward("hf"), Forward("lean")
    assert {kernel(hf, t, e, c) for t in (1, 5) for e in (False, True) for c in (False, True)} == {"hf"}
    assert {kernel(lean, t, e, c) for t in (1, 5) for e in (False, True) for c in (False, True)} == {"lean"}
    for rows in ROWS:
        f = Forward("lean", "int4", rows)
        # a prefill: the batched layers, but the native forward runs all (the same bits on every CPU)
        assert kernel(f, 40, False, True) == ("native" if rows == "native" else "lean")
        assert kernel(f, 1, False, True) == rows  # a plain step: row exact
        assert kernel(f, 5, True, True) == rows  # the verifier's chain
        assert kernel(f, 5, True, False) == ("eager" if rows == "script" else rows)  # TorchScript: chains only


def test_a_drafts_forward_takes_the_native_loops_for_short_feeds_only():
    draft = Forward("lean", "q4_1", "native", whole=False)
    assert kernel(draft, 1, False, True) == "native" and kernel(draft, SHORT_ROWS, False, True) == "native"
    assert kernel(draft, SHORT_ROWS + 1, False, True) == "lean"  # a prompt: the batched layers
    assert kernel(Forward("lean", "q4_1", "", whole=False), 1, False, True) == "lean"  # nothing built


def test_default_rows_is_the_fastest_built():
    assert default_rows(("native", "script", "eager")) == "native"
    assert default_rows(("script", "eager")) == "script"
    assert default_rows(("eager",)) == "eager" and default_rows(()) == ""


def test_the_target_replaces_its_forward(engine):
    t = engine.target
    assert engine.forward is t.forward and t.forward == Forward(t.path, "fp32", "")
    before = t.forward
    try:
        for path in t.paths:
            t.use(path)
            assert t.forward == Forward(path, "fp32", "") and before == Forward(before.path, "fp32", "")
        with pytest.raises(ValueError):
            t.use_rows("eager")  # fp32 has no row-exact forward
        engine.set_weights("int8")
        assert t.forward.path == "lean" and t.forward.rows == default_rows(t.rows()) != ""
        t.use_rows("eager")
        assert t.forward == Forward("lean", "int8", "eager")
    finally:
        engine.set_weights("fp32")
        t.use(before.path)
    assert t.forward == before
