"""The scripted int4/int8 forward (models/scripted.py) against the eager one it replaces.

The claim tested: for a chain of T >= 1 tokens the TorchScript function gives every output float
and every key and value the eager row-exact path (``rowexact.attend_rows`` over the quantized
``FusedLayer``s) gives, bit for bit, on the tiny model and on SmolLM2. tests/test_quant.py then
checks the verifier against plain decoding with the scripted path in place (trees stay eager, so
that test also compares the two implementations).
"""

from __future__ import annotations

import pytest
import torch

from specdec.models import cache as kv
from specdec.models.lean_target import ROW_EXACT
from tests.smol_helpers import smol_engine


def _both(engine, fmt: str, ids: list[int], T: int) -> None:
    engine.set_weights(fmt)
    t = engine.target
    lt = t.lean
    script = lt.script
    assert script is not None, f"{fmt}: the scripted forward should apply"
    try:
        t.reset()
        t.prefill(ids)
        L = kv.length(t.cache)
        out = {}
        for name, s in (("eager", None), ("scripted", script)):
            lt.script = s
            for _ in range(3 if s else 1):  # TorchScript optimizes its graph after profiling runs
                kv.truncate(t.cache, L)
                with torch.inference_mode():
                    h = lt.hidden(t.cache, torch.tensor(ids[-T:]), torch.arange(L, L + T).view(1, -1), None, True)
            keys = [la.keys[0, :, L : L + T].clone() for la in t.cache.layers]
            out[name] = (h, keys)
        assert torch.equal(out["eager"][0], out["scripted"][0]), f"{fmt}, T={T}: hidden states differ"
        assert all(torch.equal(a, b) for a, b in zip(out["eager"][1], out["scripted"][1])), f"{fmt}: keys differ"
    finally:
        lt.script = script
        t.reset()
        engine.set_weights("fp32")


@pytest.mark.parametrize("fmt", ROW_EXACT)
@pytest.mark.parametrize("T", [1, 5])
def test_scripted_chain_equals_eager_rows_tiny(engine, prompts, fmt, T):
    _both(engine, fmt, engine.encode(prompts[0])[:40], T)


def test_fp32_layers_take_the_eager_path(engine):
    assert engine.target.lean is None or engine.target.lean.script is None


@pytest.mark.slow
@pytest.mark.parametrize("T", [1, 5])
def test_scripted_chain_equals_eager_rows_smollm2(prompts, T):
    smol = smol_engine(draft=False)
    _both(smol, "int4", smol.encode(prompts[0])[:120], T)


def test_calibration_keeps_the_faster_of_scripted_and_eager(engine):
    from specdec.fast.calibrate_weights import use_script

    try:
        engine.set_weights("int4")
        assert use_script(engine, {"int4": {"step_us": 10.0, "eager_step_us": 12.0}})
        assert engine.target.lean.script is not None
        assert not use_script(engine, {"int4": {"step_us": 10.0, "eager_step_us": 8.0}})
        assert engine.target.lean.script is None
    finally:
        engine.set_weights("fp32")
