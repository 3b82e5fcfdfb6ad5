"""Linear layers through oneDNN with pre-packed weights, for the engine's CPU forwards.

Why: on the CPU where this was built, ``F.linear`` (MKL sgemm) cost about twice as much for 2-9
input rows as for one, so a verification forward over k + 1 tokens paid almost per token, while
oneDNN's linear with the weight reordered once into its blocked layout
(``torch.ops.mkldnn._linear_pointwise``, the op Inductor's CPU backend uses) cost about the same
for one row and for a few; results agree with ``F.linear`` to float rounding. Which path wins
depends on the machine (docs/architecture.md, "Packed linears", has the figures and where they
did not hold on another machine).

Contract:
- ``pack_linears(model) -> int`` gives every ``nn.Linear`` of a float32 CPU model a packed copy
  of its weight and a forward that uses it **only inside** ``packed_scope()`` (a thread-local
  switch); outside the scope the module runs stock ``F.linear``, so the same model object still
  behaves exactly as transformers built it for anyone else (``generate``, training, tests).
  Returns the number of layers packed; 0 (and nothing changed) where oneDNN is not available, on
  other devices or dtypes, or when ``SPECDEC_PACKED=0`` is set in the environment.
- The packed copy is made once (the engine never changes weights); a weight changed in place
  afterwards, or moved off the CPU, makes that layer fall back to ``F.linear``. Models with more
  than ``MAX_PARAMS`` linear weights are left alone (the copy would double their memory).
  Inference only (no autograd).
- ``packed_scope()`` is re-entrant and per thread.
- ``Linear(W, b)`` is the proposers' decoding linear (lean draft, Medusa, EAGLE): the weight with
  its path chosen once by size, oneDNN packed for large weights and MKL's
  ``F.linear`` for small ones, where oneDNN's fixed cost per call dominates.
  ``Linear.shared(module)`` reuses a module's packed copy (EAGLE reads the target's own LM head);
  a proposer that shares calls ``pack_linears`` on the target first (idempotent, same rule as
  ``Target``), so the order in which target and heads are built never matters.
- Why sharing matters: when the target's packed weights about fill the last-level cache, a
  proposer's own weights are cold at every step, so reading memory the target has just read is
  worth more than shaving ops (measured in docs/architecture.md).
"""

from __future__ import annotations

import os
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

_state = threading.local()


def available(weight: torch.Tensor) -> bool:
    return (
        os.environ.get("SPECDEC_PACKED", "1") != "0"
        and weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


def pack_weight(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, W, bias)`` with ``packed = pack_weight(W)``; x float32 on the CPU."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


SMALL = 120_000  # weights up to this many elements: MKL's F.linear is cheaper for the 1-3 rows of decoding


class Linear:
    """``y = x W^T (+ b)`` for decoding, with the path chosen once per weight: oneDNN packed for
    large weights, ``F.linear`` for small ones (``SMALL``: below it oneDNN's fixed cost per call
    lost on the machine measured in docs/architecture.md), or ``F.linear`` wherever packing is
    unavailable.
    Weights are used as given: the ``F.linear`` path shares the caller's tensor, a packed weight is
    a copy made here. Build it from final weights (the engine never changes weights after load)."""

    def __init__(
        self, weight: torch.Tensor, bias: torch.Tensor | None = None, packed: torch.Tensor | None = None
    ) -> None:
        self.weight, self.bias = weight.detach(), None if bias is None else bias.detach()
        if packed is None and weight.numel() > SMALL and available(weight):
            packed = pack_weight(self.weight)
        self.packed = packed

    @classmethod
    def shared(cls, module: torch.nn.Linear) -> Linear:
        """The module's weight, reusing the packed copy ``pack_linears`` gave it while that copy is
        current (same checks as the module's own forward): a proposer that reads the target's LM
        head then reads the very memory the target just read, hot in cache, not a second copy."""
        w = module.weight
        packed = getattr(module, "_specdec_packed", None)
        current = packed is not None and _version(w) == module._specdec_version and available(w)
        return cls(w, module.bias, packed if current else None)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            return linear(x, self.packed, self.bias)
        return F.linear(x, self.weight, self.bias)


MAX_PARAMS = 200_000_000  # larger models keep stock linears: packing copies every weight once


def _version(t: torch.Tensor) -> int:
    """The in-place version counter; -1 for inference tensors, which do not keep one."""
    try:
        return t._version
    except RuntimeError:
        return -1


def _forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    w = self.weight
    if (
        getattr(_state, "depth", 0)
        and x.dtype == torch.float32
        and not torch.is_grad_enabled()
        and _version(w) == self._specdec_version
        and w.device.type == "cpu"
    ):  # the copy is current
        return linear(x, self._specdec_packed, self.bias)
    return F.linear(x, w, self.bias)


def pack_linears(model: torch.nn.Module) -> int:
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and available(m.weight)]
    if sum(m.weight.numel() for m in linears) > MAX_PARAMS:
        return 0
    for module in linears:
        if not hasattr(module, "_specdec_packed"):
            pack_module(module)
    return len(linears)


def pack_module(module: torch.nn.Linear) -> None:
    """Give one linear its packed copy and the scope-switched forward (see ``pack_linears``)."""
    module._specdec_packed = pack_weight(module.weight)
    module._specdec_version = _version(module.weight)
    module.forward = types.MethodType(_forward, module)


@contextmanager
def packed_scope() -> Iterator[None]:
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1
