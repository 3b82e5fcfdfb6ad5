"""The scripted int4/int8 forward (models/scripted.py) against the eager one it replaces.

The claim tested: for a chain of T >= 1 tokens the TorchScript function gives every output float
and every key and value the eager row-exact path (``rowexact.attend_rows`` over the quantized
``FusedLayer``s) gives, bit for bit, on the tiny model and on SmolLM2. tests/test_quant.py then
checks the verifier against plain decoding with the scripted path in place (trees stay eager, so
that test also compares the two implementations).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from specdec.models import cache as kv
from specdec.models.forward import kernel
from specdec.models.lean_target import ROW_EXACT
from tests.smol_helpers import smol_engine

SCRIPTED = tuple(f for f in ROW_EXACT if f != "q4_1")  # q4_1 runs natively or eagerly (test_native.py)


def _both(engine, fmt: str, ids: list[int], T: int) -> None:
    engine.set_weights(fmt)
    t = engine.target
    lt = t.lean
    assert "script" in t.rows(), f"{fmt}: the scripted forward should apply"
    # the native forward has its own arithmetic (tests/test_native.py): eager against TorchScript
    assert kernel(replace(t.forward, rows="script"), T, True, True) == "script"
    try:
        t.reset()
        t.prefill(ids)
        L = kv.length(t.cache)
        out = {}
        for name, kind in (("eager", "eager"), ("scripted", "script")):
            for _ in range(3 if kind == "script" else 1):  # TorchScript optimizes its graph after profiling runs
                kv.truncate(t.cache, L)
                with torch.inference_mode():
                    h = lt.hidden(t.cache, torch.tensor(ids[-T:]), torch.arange(L, L + T).view(1, -1), None, kind)
            keys = [la.keys[0, :, L : L + T].clone() for la in t.cache.layers]
            out[name] = (h, keys)
        assert torch.equal(out["eager"][0], out["scripted"][0]), f"{fmt}, T={T}: hidden states differ"
        assert all(torch.equal(a, b) for a, b in zip(out["eager"][1], out["scripted"][1])), f"{fmt}: keys differ"
    finally:
        t.reset()
        engine.set_weights("fp32")


@pytest.mark.parametrize("fmt", SCRIPTED)
@pytest.mark.parametrize("T", [1, 5])
def test_scripted_chain_equals_eager_rows_tiny(engine, prompts, fmt, T):
    _both(engine, fmt, engine.encode(prompts[0])[:40], T)


def test_fp32_layers_take_the_eager_path(engine):
    assert engine.target.rows() == () and engine.forward.rows == ""
    assert engine.target.lean is None or engine.target.lean.rows() == ()


@pytest.mark.slow
@pytest.mark.parametrize("T", [1, 5])
def test_scripted_chain_equals_eager_rows_smollm2(prompts, T):
    smol = smol_engine(draft=False)
    _both(smol, "int4", smol.encode(prompts[0])[:120], T)


def test_calibration_keeps_the_fastest_of_native_scripted_and_eager(engine):
    from specdec.fast.calibrate_weights import use_forward

    try:
        engine.set_weights("int4")
        assert engine.target.rows() == ("native", "script", "eager") and engine.forward.rows == "native"
        t = {"step_us": 10.0, "script_step_us": 12.0, "eager_step_us": 13.0}
        assert use_forward(engine, {"int4": t}) == "native" and engine.forward.rows == "native"
        assert use_forward(engine, {"int4": t | {"script_step_us": 8.0}}) == "script"
        assert engine.forward.rows == "script"
        engine.set_weights("fp32")
        engine.set_weights("int4")
        assert engine.forward.rows == "native"  # a new format starts on its default
        assert use_forward(engine, {"int4": t | {"eager_step_us": 7.0}}) == "eager"
        assert engine.forward.rows == "eager"
    finally:
        engine.set_weights("fp32")
