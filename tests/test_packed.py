"""specdec/models/packed.py: the packed path runs only inside its scope and only where the plan says so,
matches F.linear to float rounding, and leaves the model stock outside it (transformers' generate
on the same object is untouched)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from specdec.models import packed as P
from specdec.models.loading import DEFAULT_TARGET

pytestmark = pytest.mark.skipif(not P.available(torch.zeros(1)), reason="oneDNN packed linears not available")


@pytest.fixture
def plan():
    """Set a plan for a test; the process's plan is restored afterwards."""
    saved = P.get_plan()

    def set_all(shapes, picks=(True, True, True, True)):
        P.set_plan({tuple(s): picks for s in shapes})

    yield set_all
    P.clear_plan()
    P.set_plan(saved)


def _load() -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(str(DEFAULT_TARGET), dtype=torch.float32).eval()


def test_linear_matches_f_linear_for_every_row_count() -> None:
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(96, 40, generator=g), torch.randn(96, generator=g)
    packed = P.pack_weight(w)
    for rows in (1, 2, 3, 9):
        x = torch.randn(rows, 40, generator=g)
        torch.testing.assert_close(P.linear(x, packed, b), torch.nn.functional.linear(x, w, b), rtol=1e-5, atol=1e-5)


def test_buckets_and_plan_lookup(plan) -> None:
    assert [P.bucket(r) for r in (1, 2, 4, 5, 12, 13, 500)] == [0, 1, 1, 2, 2, 3, 3]
    assert [P.bucket(r) for r in P.PROBE_ROWS] == [0, 1, 2, 3]
    plan([(7, 5)], (False, True, False, True))
    assert [P.use_packed((7, 5), r) for r in (1, 3, 8, 24)] == [False, True, False, True]
    assert not P.use_packed((5, 7), 3)  # a shape without a plan: stock


@torch.inference_mode()
def test_scope_switches_the_path_and_outside_it_the_model_is_stock(plan) -> None:
    stock, model = _load(), _load()
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert P.pack_linears(model) == n_linear > 0
    plan(P.shapes_in(model))
    ids = torch.randint(0, model.config.vocab_size, (1, 40), generator=torch.Generator().manual_seed(1))
    want = stock(ids).logits
    assert torch.equal(model(ids).logits, want)  # outside the scope: bit-identical to stock
    with P.packed_scope():
        with P.packed_scope():  # re-entrant
            inner = model(ids).logits
        got = model(ids).logits
    assert torch.equal(inner, got)
    assert not torch.equal(got, want)  # the packed path ran (oneDNN rounds differently)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    assert torch.equal(model(ids).logits, want)  # the scope closed
    P.clear_plan()
    with P.packed_scope():
        assert torch.equal(model(ids).logits, want)  # no plan: stock inside the scope too


def test_env_switch_turns_it_off(monkeypatch) -> None:
    monkeypatch.setenv("SPECDEC_PACKED", "0")
    model = _load()
    assert P.pack_linears(model) == 0
    assert not any(hasattr(m, "_specdec_shape") for m in model.modules())
    assert not P.Linear(torch.randn(64, 32)).ok


def test_a_weight_changed_after_packing_is_repacked(plan) -> None:
    layer = torch.nn.Linear(40, 24)
    assert P.pack_linears(layer) == 1
    plan([(24, 40)])
    x = torch.randn(3, 40)
    with torch.inference_mode(), P.packed_scope():
        layer(x)
    first = layer._specdec_packed
    with torch.no_grad():
        layer.weight.mul_(2.0)  # in place: the packed copy is now stale
    with torch.inference_mode(), P.packed_scope():
        got = layer(x)
    assert layer._specdec_packed is not first
    torch.testing.assert_close(got, torch.nn.functional.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)


def test_decoding_linear_follows_the_plan_per_row_count(plan) -> None:
    g = torch.Generator().manual_seed(2)
    w, bias = torch.randn(96, 32, generator=g), torch.randn(96, generator=g)
    lin = P.Linear(w, bias)
    plan([(96, 32)], (False, True, True, True))
    x1, x3 = torch.randn(1, 32, generator=g), torch.randn(3, 32, generator=g)
    assert torch.equal(lin(x1), torch.nn.functional.linear(x1, w, bias))  # 1 row: stock, bit-exact
    assert lin._packed is None  # the copy is made on first packed use only
    torch.testing.assert_close(lin(x3), torch.nn.functional.linear(x3, w, bias), rtol=1e-5, atol=1e-5)
    assert lin._packed is not None


def test_shared_linear_reads_the_modules_packed_copy(plan) -> None:
    layer = torch.nn.Linear(200, 700, bias=False)
    assert P.pack_linears(layer) == 1
    plan([(700, 200)])
    lin = P.Linear.shared(layer)
    x = torch.randn(2, 200)
    with torch.inference_mode():
        torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, layer.weight), rtol=1e-5, atol=1e-5)
    assert lin.packed is layer._specdec_packed  # the same memory the model's own forward reads


def test_shapes_in_finds_hooked_modules_and_wrappers_in_nested_containers() -> None:
    layer = torch.nn.Linear(20, 30)
    P.pack_linears(layer)

    class Holder:
        def __init__(self):
            self.parts = {"a": [P.Linear(torch.randn(11, 13))]}
            self.model = layer
            self.raw = torch.nn.Linear(3, 4)  # never hooked: not timed

    assert P.shapes_in(Holder()) == {(30, 20), (11, 13)}


def test_the_target_hands_eagle_its_lm_head(engine) -> None:
    """EAGLE reads the very wrapper the target scores with: one packed copy, handed explicitly."""
    if "eagle" not in engine.proposers:
        pytest.skip("no eagle head")
    assert engine.proposers["eagle"]._head is engine.target.head
    assert engine.target.head._module is engine.target.lm_head
