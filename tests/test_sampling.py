"""specdec.core.sampling: temperature / top-k / top-p rows and draws that spare the generator."""

from __future__ import annotations

import pytest
import torch

from specdec.core.sampling import sample, to_probs


def test_temperature_zero_is_one_hot_at_lowest_argmax() -> None:
    logits = torch.tensor([[0.0, 3.0, 3.0, 1.0], [5.0, -1.0, 2.0, 5.0]])
    probs = to_probs(logits, temperature=0.0)
    assert probs.dtype == torch.float32
    assert torch.equal(probs, torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]))


def test_temperature_scales_softmax() -> None:
    logits = torch.randn(3, 7, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(to_probs(logits, 2.0), torch.softmax(logits / 2.0, dim=-1))
    assert torch.allclose(to_probs(logits, 1.0), torch.softmax(logits, dim=-1))


def test_top_k_keeps_exactly_the_k_largest() -> None:
    logits = torch.tensor([0.1, 2.0, -1.0, 1.5, 0.7, 3.0])
    probs = to_probs(logits, 1.0, top_k=3)
    assert torch.equal(probs > 0, torch.tensor([False, True, False, True, False, True]))
    kept = torch.softmax(torch.tensor([2.0, 1.5, 3.0]), dim=-1)
    assert torch.allclose(probs[[1, 3, 5]], kept)
    assert torch.allclose(to_probs(logits, 1.0, top_k=6), to_probs(logits, 1.0))  # k >= V: off


@pytest.mark.parametrize(
    ("top_p", "kept"),
    [(0.3, [1]), (0.75, [1, 3]), (0.85, [0, 1, 3]), (0.99, [0, 1, 2, 3]), (1.0, [0, 1, 2, 3])],
)
def test_top_p_keeps_the_nucleus(top_p: float, kept: list[int]) -> None:
    base = torch.tensor([0.15, 0.5, 0.05, 0.3])
    probs = to_probs(base.log(), 1.0, top_p=top_p)
    assert (probs > 0).nonzero().flatten().tolist() == kept
    assert torch.allclose(probs[kept], base[kept] / base[kept].sum())
    assert probs.sum().item() == pytest.approx(1.0)


def test_top_k_then_top_p() -> None:
    base = torch.tensor([0.15, 0.5, 0.05, 0.3])
    # top-2 leaves {1: 0.625, 3: 0.375}; a nucleus of 0.6 then keeps token 1 only.
    assert torch.equal(to_probs(base.log(), 1.0, top_k=2, top_p=0.6), torch.tensor([0.0, 1, 0, 0]))


def test_batched_over_leading_dims() -> None:
    logits = torch.randn(2, 3, 11, generator=torch.Generator().manual_seed(1))
    for kwargs in ({"temperature": 0.0}, {"temperature": 0.8, "top_k": 4, "top_p": 0.9}):
        probs = to_probs(logits, **kwargs)
        assert probs.shape == (2, 3, 11)
        assert torch.allclose(probs.sum(-1), torch.ones(2, 3))
        for i in range(2):  # each row filtered on its own
            assert torch.allclose(probs[i, 1], to_probs(logits[i, 1], **kwargs))
    assert (to_probs(logits, 0.8, top_k=4) > 0).sum(-1).eq(4).all()


@pytest.mark.parametrize(
    "kwargs",
    [{"temperature": -1.0}, {"temperature": 1.0, "top_k": -1}, {"temperature": 1.0, "top_p": 0.0}],
)
def test_bad_parameters_raise(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        to_probs(torch.zeros(4), **kwargs)


def test_sample_one_hot_consumes_no_randomness() -> None:
    gen = torch.Generator().manual_seed(123)
    before = gen.get_state()
    assert sample(torch.tensor([0.0, 0.0, 1.0, 0.0]), gen) == 2
    assert torch.equal(gen.get_state(), before)


def test_sample_draws_from_the_row() -> None:
    gen = torch.Generator().manual_seed(0)
    before = gen.get_state()
    probs = torch.tensor([0.0, 0.25, 0.0, 0.75])
    draws = [sample(probs, gen) for _ in range(400)]
    assert not torch.equal(gen.get_state(), before)
    assert set(draws) == {1, 3}
    assert 0.65 < draws.count(3) / len(draws) < 0.85
    with pytest.raises(ValueError):
        sample(probs[None], gen)
