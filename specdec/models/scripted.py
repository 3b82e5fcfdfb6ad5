"""The row-exact forward of int4 and int8 layers as one TorchScript function: the eager path's own
aten calls, in the same order, without Python's per-call dispatch.

Why: on a small model with 4-bit weights the plain step is bound by per-operation overhead, not
by bytes (docs/memwall.md): about 35 torch calls per layer, 30 layers, each paying Python's
argument parsing and dispatch. TorchScript runs the same calls from its interpreter. Exactness
does not move: every call here is the call ``lean.FusedLayer`` (``quantized``) and
``rowexact.attend_rows`` (a chain) make, with the same shapes and the same operand order, so a
row's floats are the eager path's floats bit for bit (tests/test_scripted.py checks that, and
``LeanTarget`` falls back to the eager path wherever this one does not apply).

Contract:
- ``ScriptedLayers.of(layers)``: None unless every layer is ``FusedLayer.quantized`` on int4 or int8
  weights (``quant.QLinear`` whose kernel operands are exposed), else the packed operands.
- ``chain(x, cos, sin, bufs, start)``: x [T, hidden] for the tokens at cache slots
  [start, start + T), T >= 1, each seeing slots [0, its own]; keys and values written into
  ``bufs`` (per layer (k, v) [n_kv, capacity, hd]); returns the last layer's output (before the
  final norm), what ``attend_rows(..., visible=None)`` gives layer after layer.
"""

import functools
import warnings

import torch
import torch.nn.functional as F

from specdec.models import quant as Q


def _mm(x: torch.Tensor, w: list[torch.Tensor]) -> torch.Tensor:
    """``QLinear`` on int4 ([packed, sz]) or int8 ([packed_hi, sz_hi, packed_lo, sz_lo]); a bias last
    when the list has an odd length."""
    y = torch._weight_int4pack_mm_for_cpu(x.to(torch.bfloat16), w[0], 32, w[1]).float()
    if len(w) >= 4:
        y = y + torch._weight_int4pack_mm_for_cpu(x.to(torch.bfloat16), w[2], 32, w[3]).float()
    if len(w) % 2 == 1:
        y = y + w[-1]
    return y


def _chain(
    x: torch.Tensor,
    layers: list[list[list[torch.Tensor]]],
    cos: torch.Tensor,
    sin: torch.Tensor,
    ks: list[torch.Tensor],
    vs: list[torch.Tensor],
    start: int,
    H: int,
    KV: int,
    hd: int,
    eps: float,
) -> torch.Tensor:
    T, C = x.shape[0], x.shape[1]
    D, end, gqa = (H + KV) * hd, start + x.shape[0], KV != H
    for i in range(len(layers)):
        w = layers[i]
        ln1, qkv, o, ln2, gate_up, down = w[0][0], w[1], w[2], w[3][0], w[4], w[5]
        k, v = ks[i], vs[i]
        y = _mm(torch.rms_norm(x, [C], None, eps) * ln1, qkv)
        h = y[:, :D].view(T, H + KV, 2, hd // 2)
        qk = torch.addcmul(y[:, :D] * cos, torch.cat([-h[:, :, 1], h[:, :, 0]], -1).view(T, D), sin)
        k[:, start:end] = qk[:, H * hd :].view(T, KV, hd).transpose(0, 1)
        v[:, start:end] = y[:, D:].view(T, KV, hd).transpose(0, 1)
        q = qk[:, : H * hd].view(T, H, hd).transpose(0, 1)
        att = x.new_empty((T, H * hd))
        for r in range(T):
            n = start + r + 1
            a = F.scaled_dot_product_attention(
                q[:, r : r + 1].contiguous()[None], k[None, :, :n], v[None, :, :n], enable_gqa=gqa
            )
            att[r] = a[0].transpose(0, 1).reshape(-1)
        x = x + _mm(att, o)
        gu = _mm(torch.rms_norm(x, [C], None, eps) * ln2, gate_up)
        g, u = gu.chunk(2, dim=-1)
        x = x + _mm(F.silu(g) * u, down)
    return x


@functools.cache
def _scripted():
    """``_chain`` scripted once per process (its callee ``_mm`` with it), None where TorchScript
    cannot script it. TorchScript is deprecated in favour of ``torch.compile``, which generates its
    own fused loops and so its own rounding; what this module needs is the eager calls themselves."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.script(_chain)
    except Exception:  # noqa: BLE001 - any failure to script means the eager path
        return None


def _operands(q) -> "list[torch.Tensor] | None":
    """The kernel operands of a ``QLinear`` on int4 or int8 (its bias last), None otherwise."""
    run = getattr(q, "_run", None)
    if getattr(q, "fmt", None) == "int4" and hasattr(run, "packed"):
        out = [run.packed, run.sz]
    elif getattr(q, "fmt", None) == "int8" and hasattr(run, "parts"):
        out = [run.parts[0].packed, run.parts[0].sz, run.parts[1].packed, run.parts[1].sz]
    else:
        return None
    return out + ([q.bias] if q.bias is not None else [])


class ScriptedLayers:
    def __init__(self, layers: list[list[list[torch.Tensor]]], H: int, KV: int, hd: int, eps: float) -> None:
        self.layers, self.H, self.KV, self.hd, self.eps = layers, H, KV, hd, eps

    @classmethod
    def of(cls, layers) -> "ScriptedLayers | None":
        if _scripted() is None:
            return None
        out = []
        for la in layers:
            if not (isinstance(la.qkv, Q.Scaled) and isinstance(la.gate_up, Q.Scaled)):
                return None
            ws = [_operands(la.qkv.q), _operands(la.o), _operands(la.gate_up.q), _operands(la.down)]
            if any(w is None for w in ws):
                return None
            out.append([[la.qkv.scale], ws[0], ws[1], [la.gate_up.scale], ws[2], ws[3]])
        la = layers[0]
        return cls(out, la.H, la.KV, la.hd, la.eps)

    def chain(self, x, cos, sin, bufs, start: int) -> torch.Tensor:
        ks, vs = [b[0] for b in bufs], [b[1] for b in bufs]
        return _scripted()(x, self.layers, cos, sin, ks, vs, start, self.H, self.KV, self.hd, self.eps)
