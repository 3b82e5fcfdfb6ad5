"""The row-exact forward on 4-bit weights as one native call (``specdec/kernels/rows.cpp``).

Why: the TorchScript chain (``scripted.py``) removed Python's dispatch but still pays about 35 aten
calls a layer, each a few microseconds on a tensor of 576 floats, and the CPU's attention kernel
costs tens of microseconds for one query. The native forward runs norm, rotary, attention and the
MLP's activation as plain loops around the format's matmuls (torch's int4 kernel for "int4",
``kernels/q4.cpp`` for "q4_1"), and serves chains and trees alike (a tree node reads its
ancestors' keys in place, in the order plain decoding would have them).

Exactness: its arithmetic is its own (not the eager path's), so it is used for every row-exact
forward of a target or for none: plain steps, chains and trees all come from the same loops, and
each row's floats do not depend on the other rows (tests/test_quant.py checks k-row forwards,
chains and trees, against one-row steps bit for bit; tests/test_native.py the result against the
eager path to float tolerance).

Contract:
- ``NativeLayers.of(layers)``: None unless ``kernels.native()`` built and every layer is
  ``FusedLayer.quantized`` on int4 or q4_1 weights; else the packed operands (``LeanTarget`` asks
  only for a float32 model: the loops read float32 caches).
- ``rows(x, cos, sin, bufs, start, visible)``: ``rowexact.attend_rows`` layer after layer for x
  [T, hidden] at slots [start, start + T), ``visible`` None (a chain) or per row the new tokens'
  indices it sees (sorted, its own last); keys and values written into ``bufs``; returns the last
  layer's output before the final norm; ``norm(x, w)`` that final norm by the same loops;
  ``rows_slots(x, cos, sin, bufs, slot, start, at, visible)`` rows of many sequences (the batch
  target's slot cache) in one call, each row's floats those of its sequence alone.
"""

from __future__ import annotations

import torch

from specdec.kernels import key as kernels_key  # noqa: F401 - re-exported for fast/ (calibration keys)
from specdec.kernels import native
from specdec.models import quant as Q

_EMPTY = torch.empty(0, dtype=torch.long)
_NONE = torch.empty(0)


def _operands(q) -> list[torch.Tensor] | None:
    """A linear's three operands for rows.cpp: torch's int4 pack (and an empty third) or Q4_1 blocks."""
    run = getattr(q, "_run", None)
    if getattr(q, "fmt", None) == "int4" and hasattr(run, "packed"):
        return [run.packed, run.sz, _NONE]
    if getattr(q, "fmt", None) == "q4_1" and hasattr(run, "operands"):
        return list(run.operands)
    return None


class NativeLayers:
    def __init__(self, weights: list[torch.Tensor], n: int, H: int, KV: int, hd: int, eps: float) -> None:
        self.weights, self.n, self.H, self.KV, self.hd, self.eps = weights, n, H, KV, hd, eps

    @classmethod
    def of(cls, layers) -> NativeLayers | None:
        if not layers or native() is None:
            return None
        out: list[torch.Tensor] = []
        for la in layers:
            if not (isinstance(la.qkv, Q.Scaled) and isinstance(la.gate_up, Q.Scaled)):
                return None
            ws = [_operands(la.qkv.q), _operands(la.o), _operands(la.gate_up.q), _operands(la.down)]
            if any(w is None for w in ws):
                return None
            bias = la.qkv.q.bias if la.qkv.q.bias is not None else torch.empty(0)
            out += [la.qkv.scale, *ws[0], bias, *ws[1], la.gate_up.scale, *ws[2], *ws[3]]
        la = layers[0]
        return cls(out, len(layers), la.H, la.KV, la.hd, float(la.eps))

    def norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """The final RMSNorm by rows.cpp's loops (torch's differs by CPU in the last bits)."""
        return native().norm(x.float().contiguous(), w.float(), self.eps)

    def rows_slots(self, x, cos, sin, bufs, slot: list, start: list, at: list, visible: list) -> torch.Tensor:
        """Rows of many sequences in one call (the batch target): ``bufs`` per layer [S, KV,
        capacity, hd]; per row its cache slot, its sequence's prefix length, the position its key
        goes to, and ``visible[t]`` None (a chain: [0, at]) or its tree list (indices from the
        prefix, its own last). Row t's floats are what ``rows`` gives it in its sequence alone."""
        ks, vs = [b[0] for b in bufs], [b[1] for b in bufs]
        lists = [seen or [] for seen in visible]
        vis = torch.tensor([i for seen in lists for i in seen], dtype=torch.long)
        off = torch.tensor([0, *torch.tensor([len(s) for s in lists]).cumsum(0).tolist()], dtype=torch.long)
        per_row = [torch.tensor(v, dtype=torch.long) for v in (slot, start, at)]
        x, cos, sin = x.float(), cos.float(), sin.float()
        dims = (self.H, self.KV, self.hd, self.eps)
        return native().rows_slots(x, self.weights, cos, sin, ks, vs, *per_row, vis, off, *dims)

    def rows(self, x, cos, sin, bufs, start: int, visible: list[list[int]] | None = None) -> torch.Tensor:
        ks, vs = [b[0] for b in bufs], [b[1] for b in bufs]
        if visible is None:
            vis = off = _EMPTY
        else:
            vis = torch.tensor([i for seen in visible for i in seen], dtype=torch.long)
            off = torch.tensor([0, *torch.tensor([len(s) for s in visible]).cumsum(0).tolist()], dtype=torch.long)
        x, cos, sin = x.float(), cos.float(), sin.float()
        return native().rows(x, self.weights, cos, sin, ks, vs, start, vis, off, self.H, self.KV, self.hd, self.eps)
