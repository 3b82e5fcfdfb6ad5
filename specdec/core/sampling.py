"""Logits -> probabilities, and one draw from a probability row.

Contract
--------
``to_probs(logits, temperature, top_k=0, top_p=1.0)`` maps logits ``[..., V]`` to float32
probabilities ``[..., V]``, batched over any leading dimensions:

- ``temperature == 0``: a one-hot row at ``torch.argmax`` (ties go to the lowest index). Greedy
  decoding is therefore the same code path as sampling (invariant I5): a one-hot p and a one-hot q
  make verification accept or reject with certainty.
- otherwise ``softmax(logits / temperature)``, restricted to the ``top_k`` largest logits
  (0 = off) and then to the nucleus of mass ``top_p`` (1.0 = off: the smallest set of tokens, taken
  in order of decreasing probability, whose cumulative mass is >= ``top_p``; never empty), and
  renormalised.

The target's rows (p) and the draft's rows (q) must both come from this function with the same
parameters (invariant I3): verification is exact for the distribution these rows describe.

``sample(probs, generator)`` draws one token id from a 1-D row. A one-hot row (``max == 1.0``)
returns its argmax without consuming randomness, so greedy decoding never advances the generator.
"""

from __future__ import annotations

import torch

__all__ = ["to_probs", "sample"]


def _check_params(temperature: float, top_k: int, top_p: float) -> None:
    if not temperature >= 0.0:  # also rejects NaN
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0 = off), got {top_k!r}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1] (1.0 = off), got {top_p!r}")


def _one_hot_argmax(logits: torch.Tensor) -> torch.Tensor:
    """One-hot float32 rows at the argmax of the last dimension (lowest index on ties)."""
    index = logits.argmax(dim=-1, keepdim=True)
    zeros = torch.zeros(logits.shape, dtype=torch.float32, device=logits.device)
    return zeros.scatter_(-1, index, 1.0)


def _keep_top_k(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Set all but exactly ``top_k`` largest logits per row to -inf (no-op when off)."""
    if top_k == 0 or top_k >= logits.shape[-1]:
        return logits
    index = logits.topk(top_k, dim=-1).indices
    keep = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
    keep.scatter_(-1, index, True)
    return logits.masked_fill(~keep, float("-inf"))


def _keep_nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero all tokens outside the top-p nucleus and renormalise (no-op when off).

    A token (in decreasing order of probability) is kept iff the mass strictly before it is
    < top_p; that is exactly the smallest prefix whose mass reaches top_p, and it always holds the
    most probable token.
    """
    if top_p >= 1.0:
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    keep_sorted = mass_before < top_p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)
    kept = probs.masked_fill(~keep, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def to_probs(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Probabilities [..., V] (float32) for logits [..., V]; see the module docstring."""
    _check_params(temperature, top_k, top_p)
    if logits.dim() == 0:
        raise ValueError("logits must have a vocabulary dimension [..., V]")
    logits = logits.float()
    if temperature == 0.0:
        return _one_hot_argmax(logits)
    scaled = _keep_top_k(logits / temperature, top_k)
    return _keep_nucleus(torch.softmax(scaled, dim=-1), top_p)


def sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """One token id drawn from the 1-D row ``probs``.

    A one-hot row returns its argmax and leaves ``generator`` untouched; any other row is passed
    to ``torch.multinomial`` (which accepts unnormalised non-negative rows).
    """
    if probs.dim() != 1:
        raise ValueError(f"sample() takes one 1-D row, got shape {tuple(probs.shape)}")
    top, index = probs.max(dim=0)
    if float(top) == 1.0:
        return int(index)
    return int(torch.multinomial(probs, 1, generator=generator))
