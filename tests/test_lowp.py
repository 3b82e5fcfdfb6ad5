"""specdec/fast/lowp.py: the proposers' lower-precision weights, and calibration's choice of them.

Every precision of every proposer gives transformers' greedy tokens on the shipped models; the
draft model's q in a low precision is exactly the distribution it sampled from (the one computed
from its low-precision logits, not float32's), which is what keeps temperature > 0 exact (the
chi-square test of tests/test_distribution.py runs on an int8 draft too); the target's own
LM head is never touched; the decision rule works on injected timings (no timing is asserted).
"""

from __future__ import annotations

import pytest
import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.proposer import Context
from specdec.core.sampling import to_probs
from specdec.fast import calibrate as C
from specdec.fast import calibrate_lowp as CL
from specdec.fast import lowp
from specdec.models import packed as P

LOW = [p for p in lowp.PRECISIONS if p != "fp32"]
needs_fbgemm = pytest.mark.skipif(lowp.precisions(torch.zeros(1, 1)) == ("fp32",), reason="no fbgemm here")


def _restore(engine) -> None:
    for name, prop in CL.parts(engine).items():
        prop.set_precision(engine.calibration.choices.get("precision", {}).get(name, "fp32"))


@needs_fbgemm
@pytest.mark.parametrize("precision", LOW)
def test_a_linear_in_low_precision_is_close_and_switches_back_exactly(precision) -> None:
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(96, 40, generator=g), torch.randn(96, generator=g)
    lin = P.Linear(w, b)
    x = torch.randn(3, 40, generator=g)
    want = torch.nn.functional.linear(x, w, b)
    lowp.set_precision(lin, precision)
    got = lin(x)
    tol = 1e-3 if precision == "fp16" else 3e-2
    assert got.shape == want.shape and not torch.equal(got, want)  # another kernel really ran
    assert float((got - want).abs().max() / want.abs().max()) < tol
    assert lin(x[0]).shape == (96,) and torch.allclose(lin(x[0]), got[0], atol=1e-5)  # a vector as one row
    lowp.set_precision(lin, "fp32")
    assert lin.low is None and torch.equal(lin(x), P.Linear(w, b)(x))
    with pytest.raises(ValueError, match="precision must be one of"):
        lowp.set_precision(lin, "fp8")


def test_low_precision_needs_a_float32_cpu_weight() -> None:
    assert lowp.precisions(torch.zeros(2, 2, dtype=torch.bfloat16)) == ("fp32",)
    lin = P.Linear(torch.zeros(4, 4, dtype=torch.bfloat16))
    lowp.set_precision(lin, "int8")  # not available: stays on its own weight
    assert lin.low is None


def test_decide_keeps_float32_unless_a_precision_wins_by_the_margin() -> None:
    t = {"precision": {"draft": {"fp32": 1000.0, "fp16": 980.0}, "medusa": {"fp32": 5000.0, "fp16": 2500.0}}}
    assert C.decide(t)["precision"] == {"draft": "fp32", "medusa": "fp16"}
    # int8 fastest, fp16 within the margin of it: the more precise one
    t = {"precision": {"eagle": {"fp32": 4000.0, "fp16": 2540.0, "int8": 2450.0}}}
    assert C.decide(t)["precision"] == {"eagle": "fp16"}
    t = {"precision": {"eagle": {"fp32": 4000.0, "fp16": 3000.0, "int8": 2000.0}}}
    assert C.decide(t)["precision"] == {"eagle": "int8"}
    assert C.decide({"precision": {"draft": {"fp32": 10.0}}})["precision"] == {"draft": "fp32"}
    assert "precision" not in C.decide({})


def _hf_greedy(engine, ids, n):
    x = torch.tensor([ids])
    with torch.inference_mode():
        out = engine.target.model.generate(
            input_ids=x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n, pad_token_id=0
        )
    new = out[0, len(ids) :].tolist()
    eos = sorted(engine.eos_ids)
    cut = min((new.index(e) + 1 for e in eos if e in new), default=len(new))
    return new[:cut]


@needs_fbgemm
def test_every_precision_of_every_proposer_gives_transformers_greedy_tokens(engine, prompts) -> None:
    parts = CL.parts(engine)
    assert {"draft", "medusa", "eagle"} <= set(parts)
    spec = lambda m: GenerateSpec(method=m, max_new_tokens=32, sampling=SamplingParams(temperature=0.0))
    try:
        for prompt in prompts[:2]:
            ids = engine.encode(prompt)
            want = _hf_greedy(engine, ids, 32)
            for precision in lowp.PRECISIONS:
                for name, prop in parts.items():
                    prop.set_precision(precision)
                    assert engine.generate(ids, spec(name)).tokens == want, (name, precision)
    finally:
        _restore(engine)


@needs_fbgemm
def test_the_target_head_is_never_lowered(engine) -> None:
    eagle = engine.proposers["eagle"]
    try:
        eagle.set_precision("fp16")
        assert engine.target.head.low is None and eagle._own_head.low is not None
        assert eagle._own_head is not engine.target.head
    finally:
        _restore(engine)


@needs_fbgemm
@pytest.mark.parametrize("precision", LOW)
def test_the_draft_q_is_the_distribution_of_its_own_low_precision_logits(engine, precision) -> None:
    draft = engine.proposers["draft"]
    ids = engine.encode("def main(argv):\n    ")
    params = SamplingParams(temperature=1.0, seed=0)
    spec = GenerateSpec(method="draft", k=1, confidence=0.0, sampling=params)
    ctx = lambda: Context(ids, spec, 8, 1, torch.Generator().manual_seed(0))
    was = draft.runner
    try:
        draft.use("lean")
        qs = {}
        for p in ("fp32", precision):
            draft.set_precision(p)
            got = draft.propose(ctx())
            lean = draft.runners["lean"]
            lean.truncate(0)
            with torch.inference_mode():
                logits = lean.forward(ids).float()
            draft.state.forget()
            qs[p] = got.q[0]
            assert torch.equal(got.q[0], to_probs(logits, 1.0)), p  # exactly what it sampled from
        assert not torch.equal(qs["fp32"], qs[precision])  # the precision really changed q
    finally:
        draft.use("lean" if was is draft.runners.get("lean") else "hf")
        _restore(engine)


def test_calibration_times_only_precisions_that_draft_as_float32_does(engine, monkeypatch) -> None:
    parts = CL.parts(engine)
    timings = CL.measure(engine, {"medusa": parts["medusa"]}, samples=1)
    assert set(timings) == {"medusa"} and "fp32" in timings["medusa"]
    assert set(timings["medusa"]) <= set(parts["medusa"].precisions)
    assert parts["medusa"]._pairs[0][1].low is None  # measure leaves float32 behind
    _restore(engine)
