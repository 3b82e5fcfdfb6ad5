"""engine/packed.py: the packed path runs only inside its scope, matches F.linear to float rounding,
and leaves the model stock outside it (transformers' generate on the same object is untouched)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from engine import packed as P
from engine.loading import DEFAULT_TARGET

pytestmark = pytest.mark.skipif(not P.available(torch.zeros(1)), reason="oneDNN packed linears not available")


def _load() -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(str(DEFAULT_TARGET), dtype=torch.float32).eval()


def test_linear_matches_f_linear_for_every_row_count() -> None:
    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(96, 40, generator=g), torch.randn(96, generator=g)
    packed = P.pack_weight(w)
    for rows in (1, 2, 3, 9):
        x = torch.randn(rows, 40, generator=g)
        torch.testing.assert_close(P.linear(x, packed, b), torch.nn.functional.linear(x, w, b), rtol=1e-5, atol=1e-5)


@torch.inference_mode()
def test_scope_switches_the_path_and_outside_it_the_model_is_stock() -> None:
    stock, model = _load(), _load()
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert P.pack_linears(model) == n_linear > 0
    ids = torch.randint(0, model.config.vocab_size, (1, 40), generator=torch.Generator().manual_seed(1))
    want = stock(ids).logits
    assert torch.equal(model(ids).logits, want)  # outside the scope: bit-identical to stock
    with P.packed_scope():
        with P.packed_scope():  # re-entrant
            inner = model(ids).logits
        got = model(ids).logits
    assert torch.equal(inner, got)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    assert torch.equal(model(ids).logits, want)  # the scope closed


def test_env_switch_turns_it_off(monkeypatch) -> None:
    monkeypatch.setenv("SPECDEC_PACKED", "0")
    model = _load()
    assert P.pack_linears(model) == 0
    assert not any(hasattr(m, "_specdec_packed") for m in model.modules())


def test_a_weight_changed_after_packing_falls_back_to_the_current_weight() -> None:
    layer = torch.nn.Linear(40, 24)
    assert P.pack_linears(layer) == 1
    x = torch.randn(3, 40)
    with torch.no_grad():
        layer.weight.mul_(2.0)  # in place: the packed copy is now stale
    with torch.inference_mode(), P.packed_scope():
        got = layer(x)
    torch.testing.assert_close(got, torch.nn.functional.linear(x, layer.weight, layer.bias))


def test_decoding_linear_picks_a_path_per_weight_and_computes_f_linear(monkeypatch) -> None:
    g = torch.Generator().manual_seed(2)
    small_w, large_w = torch.randn(64, 32, generator=g), torch.randn(1024, 160, generator=g)
    bias = torch.randn(1024, generator=g)
    small, large = P.Linear(small_w), P.Linear(large_w, bias)
    assert small.packed is None and large.packed is not None  # MKL below P.SMALL elements, oneDNN above
    for rows in (1, 2, 3):
        x, y = torch.randn(rows, 32, generator=g), torch.randn(rows, 160, generator=g)
        torch.testing.assert_close(small(x), torch.nn.functional.linear(x, small_w), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(large(y), torch.nn.functional.linear(y, large_w, bias), rtol=1e-5, atol=1e-5)
    monkeypatch.setenv("SPECDEC_PACKED", "0")
    assert P.Linear(large_w).packed is None


def test_shared_linear_reads_the_modules_packed_copy() -> None:
    layer = torch.nn.Linear(200, 700, bias=False)
    assert P.pack_linears(layer) == 1
    lin = P.Linear.shared(layer)
    assert lin.packed is layer._specdec_packed  # the same memory the model's own forward reads
    x = torch.randn(2, 200)
    with torch.inference_mode():
        torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, layer.weight), rtol=1e-5, atol=1e-5)
        assert P.Linear.shared(torch.nn.Linear(8, 4)).packed is None  # never packed, small: plain F.linear


def test_shared_linear_ignores_a_stale_packed_copy() -> None:
    layer = torch.nn.Linear(200, 700, bias=False)
    P.pack_linears(layer)
    with torch.no_grad():
        layer.weight.mul_(2.0)  # in place after packing: the module's copy is stale
    lin = P.Linear.shared(layer)
    assert lin.packed is not layer._specdec_packed
    x = torch.randn(2, 200)
    with torch.inference_mode():
        torch.testing.assert_close(lin(x), torch.nn.functional.linear(x, layer.weight), rtol=1e-5, atol=1e-5)


def test_eagle_shares_the_targets_packed_head_whichever_is_built_first() -> None:
    """Eagle.load packs the target by the target's own rule, so the head it reads is the packed
    copy the target's forward uses, even when no Target was built before it."""
    from engine.loading import ASSETS, DEFAULT_TARGET, load_model
    from engine.proposers.eagle import Eagle
    from engine.target import Target

    model = load_model(DEFAULT_TARGET, "target", "cpu", torch.float32)  # a fresh copy, never packed
    head = model.get_output_embeddings()
    assert not hasattr(head, "_specdec_packed")
    eagle = Eagle.load(ASSETS / "eagle", model)
    if not P.available(head.weight):
        assert eagle._head.packed is None
        return
    assert eagle._head.packed is head._specdec_packed
    Target(model)  # built second: reuses the same packed copy
    assert eagle._head.packed is head._specdec_packed
