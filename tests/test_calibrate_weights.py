"""specdec/fast/calibrate_weights.py: what the weight calibration times and how it decides."""

from __future__ import annotations

import pytest

from specdec.fast import calibrate_weights as W


def test_measure_times_every_format_and_the_eager_twin_of_a_scripted_one(engine):
    formats = W.candidates(engine)
    assert formats[0] == "fp32" and "q4_1" in formats  # the integer path exists on every CPU
    assert "int4" not in formats and "int8" not in formats  # torch's float kernels: verify ~ k steps
    timings = W.measure(engine, ["fp32", "int4"])
    assert engine.target.weights == "fp32"  # left as it was
    for fmt in ("fp32", "int4"):
        t = timings[fmt]
        assert t["step_us"] > 0 and set(t["verify_us"]) == {str(k) for k in W.VERIFY_K} and t["bytes"] > 0
    assert "eager_step_us" in timings["int4"] and "eager_step_us" not in timings["fp32"]
    assert "script_step_us" in timings["int4"]  # native by default, TorchScript and eager beside it
    assert timings["int4"]["bytes"] < timings["fp32"]["bytes"] / 4


def test_decide_keeps_fp32_unless_another_format_wins_by_the_margin():
    t = {"fp32": {"step_us": 100.0}, "int4": {"step_us": 97.0}, "int8": {"step_us": 99.0}}
    assert W.decide(t, margin=0.05) == "fp32"
    assert W.decide(t, margin=0.0) == "int4"
    assert W.decide({"fp32": {"step_us": 100.0}, "int4": {"step_us": 40.0}}) == "int4"


def test_decide_weighs_the_verify_cost_of_a_speculative_step():
    t = {
        "fp32": {"step_us": 100.0, "verify_us": {"4": 300.0}},
        "int4": {"step_us": 40.0, "verify_us": {"4": 120.0}},
        "q4_1": {"step_us": 43.0, "verify_us": {"4": 70.0}},
    }
    # at the prior alpha 0.6 a 4-token verify emits 2.31 tokens: q4_1 70 / 2.31 = 30 us a token,
    # int4 min(40, 52) = 40: the slower plain step wins by its cheaper verify
    assert W.decide(t) == "q4_1"
    assert W.token_us(t["q4_1"]) == pytest.approx(70 / ((1 - 0.6**5) / 0.4))
    assert W.decide(t, alpha=0.0) == "int4"  # nothing accepted: the fastest plain step
    # the Qwen2.5-Coder 1.5B's timings on an AMX machine (2026-12-05): int4 plain 16% faster, verify 3.5x
    qwen = {
        "fp32": {"step_us": 231452.0, "verify_us": {"4": 478969.0}},
        "int4": {"step_us": 66682.0, "verify_us": {"4": 233713.0}},
        "q4_1": {"step_us": 79676.0, "verify_us": {"4": 110577.0}},
    }
    assert W.decide(qwen) == "q4_1" and W.decide(qwen, alpha=0.0) == "int4"


def test_auto_weights_stay_4_bit_for_batching_only_where_the_native_batch_forward_exists(monkeypatch):
    """A batch on 4-bit weights runs the native loops, every row its solo forward
    (tests/test_batch_native.py); without the kernels a batch's ragged forward is not row-exact, so
    auto keeps fp32 for any command that runs the batching backend (``--concurrency 1`` included)."""
    from types import SimpleNamespace as NS

    import specdec.kernels
    from specdec.engine.load import _weights

    gguf = NS(model=NS(parts=["model.gguf"]))

    def auto(**kw):
        return _weights(NS(weights="auto", device="cpu", **kw), gguf)

    assert auto() == "auto" and auto(max_batch=1) == "auto"  # one request at a time: measured
    assert auto(concurrency=[1]) == "auto" and auto(max_batch=8) == "auto"  # native batches: measured too
    monkeypatch.setattr(specdec.kernels, "native", lambda: None)  # no kernels: batches keep fp32
    assert auto(concurrency=[1]) == "fp32" and auto(concurrency=[1, 8]) == "fp32" and auto(max_batch=8) == "fp32"
    assert auto() == "auto"  # a single request still measures (torch's int4 kernel, if any)
    assert _weights(NS(weights="int4", device="cpu", concurrency=[1]), gguf) == "int4"  # asked for: kept
    assert _weights(NS(weights="auto", device="cpu"), NS(model=None)) == "fp32"  # not from a GGUF
