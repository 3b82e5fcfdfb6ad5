"""Linear layers through oneDNN with pre-packed weights, used only where measurement says they pay.

Why: oneDNN's linear with the weight reordered once into its blocked layout
(``torch.ops.mkldnn._linear_pointwise``, the op Inductor's CPU backend uses) can cost about the same
for one row and for a few, where MKL's ``F.linear`` costs nearly per row; on another CPU it is
slower than ``F.linear`` for one row. Which path wins depends on the machine, the weight's shape
and the number of rows, so nothing here decides by a constant: ``specdec/fast/calibrate.py`` times both
paths per weight shape and row bucket on the running machine and installs a plan with
``set_plan``. Shapes without a plan use stock ``F.linear`` (never slower than transformers).

Contract:
- ``bucket(rows)``: the row bucket (0: 1 row, 1: 2-4, 2: 5-12, 3: 13+); ``PROBE_ROWS`` the row
  count calibration times for each bucket.
- ``set_plan(plan)`` merges ``{(out, in): (packed?, per bucket)}`` into the process's plan;
  ``clear_plan()`` forgets it, ``get_plan()`` copies it; ``use_packed(shape, rows)`` reads it.
- ``pack_linears(model) -> int`` gives every ``nn.Linear`` of a float32 CPU model a forward that
  takes the packed path **only inside** ``packed_scope()`` (a thread-local switch) and only where
  the plan says so (a module whose shape the plan never packs keeps its stock forward); outside
  the scope the module runs stock ``F.linear``, so the same model object still behaves exactly as
  transformers built it for anyone else (``generate``, training, tests).
  Returns the number of layers hooked; 0 (and nothing changed) where oneDNN is not available, on
  other devices or dtypes, or when ``SPECDEC_PACKED=0`` is set in the environment. Models with
  more than ``MAX_PARAMS`` linear weights are left alone (a packed copy doubles their memory).
- A packed copy is made on first use (``module_packed``) and remade when the weight changed in
  place (its version counter moved). Inference only (no autograd).
- ``Linear(W, b)`` is the proposers' decoding linear (lean draft, Medusa, EAGLE), the same rule per
  call; ``Linear.shared(module)`` reads a module's own packed copy: the target hands EAGLE its LM
  head this way (``Target.head``), so EAGLE reads the very memory the target just read. A
  proposer's ``Linear`` may carry ``low``, a lower-precision copy (``lowp.py``), which it then runs.
- ``seen_shapes()``: the float32 CPU weight shapes hooked or wrapped so far; ``shapes_in(obj)``
  those reachable from an object (an engine's target and proposers), for calibration.
"""

from __future__ import annotations

import threading
import types
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from specdec import env

_state = threading.local()
PROBE_ROWS = (1, 3, 8, 24)  # the row count timed for each bucket
_plan: dict[tuple[int, int], tuple[bool, ...]] = {}
_seen: set[tuple[int, int]] = set()
_hooked: weakref.WeakSet = weakref.WeakSet()  # modules pack_linears took on
MAX_PARAMS = 200_000_000  # larger models keep stock linears: packing copies every weight once


def available(weight: torch.Tensor) -> bool:
    return (
        env.on("SPECDEC_PACKED")
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


def bucket(rows: int) -> int:
    return 0 if rows <= 1 else 1 if rows <= 4 else 2 if rows <= 12 else 3


def set_plan(plan: dict[tuple[int, int], tuple[bool, ...]]) -> None:
    _plan.update({tuple(s): tuple(v) for s, v in plan.items()})
    _rehook()


def clear_plan() -> None:
    _plan.clear()
    _rehook()


def _rehook() -> None:
    """A hooked module whose shape never takes the packed path gets its stock forward back (the
    hook's checks cost about a microsecond a call); one that may take it gets the hook."""
    for module in list(_hooked):
        if any(_plan.get(module._specdec_shape, ())):
            module.forward = types.MethodType(_forward, module)
        else:
            module.__dict__.pop("forward", None)


def get_plan() -> dict[tuple[int, int], tuple[bool, ...]]:
    return dict(_plan)


def use_packed(shape: tuple[int, int], rows: int) -> bool:
    p = _plan.get(shape)
    return p is not None and p[bucket(rows)]


def seen_shapes() -> list[tuple[int, int]]:
    return sorted(_seen)


def shapes_in(obj, depth: int = 8) -> set[tuple[int, int]]:
    """The weight shapes that follow the plan reachable from ``obj``: its hooked ``nn.Linear``
    modules (``pack_linears``) and ``Linear`` wrappers, through attributes, lists, tuples and
    dicts (``depth`` levels): what an engine's target and proposers run, for calibration to time."""
    out: set[tuple[int, int]] = set()
    if isinstance(obj, torch.nn.Module):
        return {m._specdec_shape for m in obj.modules() if hasattr(m, "_specdec_shape") and available(m.weight)}
    if isinstance(obj, Linear):
        return {obj.shape} if obj.ok else out
    if depth <= 0 or isinstance(obj, (torch.Tensor, str, bytes, int, float)):
        return out
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else None
    if items is None:
        items = getattr(obj, "__dict__", {}).values()
    for item in items:
        out |= shapes_in(item, depth - 1)
    return out


def _remember(weight: torch.Tensor) -> tuple[int, int]:
    shape = (int(weight.shape[0]), int(weight.shape[1]))
    if available(weight):
        _seen.add(shape)
    return shape


def _version(t: torch.Tensor) -> int:
    """The in-place version counter; -1 for inference tensors, which do not keep one."""
    try:
        return t._version
    except RuntimeError:
        return -1


def _rows(x: torch.Tensor) -> int:
    return x.numel() // x.shape[-1] if x.shape[-1] else 0


def module_packed(module: torch.nn.Linear) -> torch.Tensor:
    """The module's packed copy of its current weight, made (or remade) here when needed."""
    w = module.weight
    if getattr(module, "_specdec_packed", None) is None or module._specdec_version != _version(w):
        module._specdec_packed = pack_weight(w)
        module._specdec_version = _version(w)
    return module._specdec_packed


class Linear:
    """``y = x W^T (+ b)`` for decoding: oneDNN packed where the plan says so for this shape and
    row count, else ``F.linear`` on the caller's tensor. Build it from final weights."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        self.weight, self.bias = weight.detach(), None if bias is None else bias.detach()
        self.shape = _remember(self.weight)
        self.ok = available(self.weight)
        self._module: torch.nn.Linear | None = None
        self._packed: torch.Tensor | None = None
        self.low = None  # a lower-precision copy a proposer's calibration chose (lowp.py)

    @classmethod
    def shared(cls, module: torch.nn.Linear) -> Linear:
        """The module's weight, packed (when packed) into the module's own copy."""
        lin = cls(module.weight, module.bias)
        lin._module = module
        return lin

    @property
    def packed(self) -> torch.Tensor:
        if self._module is not None:
            return module_packed(self._module)
        if self._packed is None:
            self._packed = pack_weight(self.weight)
        return self._packed

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.low is not None:
            return self.low(x)
        if self.ok and x.dtype == torch.float32 and use_packed(self.shape, _rows(x)):
            return linear(x, self.packed, self.bias)
        return F.linear(x, self.weight, self.bias)


def _forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    w = self.weight
    if (
        getattr(_state, "depth", 0)
        and x.dtype == torch.float32
        and w.device.type == "cpu"
        and not torch.is_grad_enabled()
        and use_packed(self._specdec_shape, _rows(x))
    ):
        return linear(x, module_packed(self), self.bias)
    return F.linear(x, w, self.bias)


def pack_linears(model: torch.nn.Module) -> int:
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and available(m.weight)]
    if sum(m.weight.numel() for m in linears) > MAX_PARAMS:
        return 0
    for module in linears:
        if not hasattr(module, "_specdec_shape"):
            pack_module(module)
    return len(linears)


def pack_module(module: torch.nn.Linear) -> None:
    """Hook one linear's forward to the plan (see ``pack_linears``); its copy is made on first use."""
    module._specdec_shape = _remember(module.weight)
    module._specdec_packed = None
    module._specdec_version = _version(module.weight)
    _hooked.add(module)
    if any(_plan.get(module._specdec_shape, ())):
        module.forward = types.MethodType(_forward, module)


@contextmanager
def packed_scope() -> Iterator[None]:
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1
