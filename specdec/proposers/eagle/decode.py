"""EAGLE's decoding forward: the trained layer through the engine's one fused layer body.

Why: drafting calls the EAGLE layer once per tree level over one to a few rows, where a forward is
almost all per-op overhead. ``lean.FusedLayer`` computes the same function as ``EagleLayer`` from
the same weights in fewer, cheaper ops (norm weights folded, RoPE fused into the QKV projection,
the CPU flash kernel, each linear on its cheaper path); only the fusion ``fc`` is EAGLE's own.

Contract: ``EagleDecoder(layer)`` is built from the trained layer's final weights (the fused ones
are copies: change the module before building, never after); ``attend(f, e, pos, kv, mask)``
writes n new inputs [n, H] at positions ``pos`` [n] into slots kv.length..+n and returns the
predicted features [n, H]; ``mask`` [n, kv.length + n] bool (True = visible) or None for causal.
It advances kv.length. ``new_kv(capacity)`` gives an empty cache of the layer's shape.
``EagleReference(layer)`` has the same interface through the trained module's own ops
(``EagleLayer.qkv_at`` / ``out``): the simpler path, which calibration keeps where the fused one
does not measure faster, and the reference the tests check the fused one against.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specdec.models import packed as P
from specdec.models.lean import FusedLayer, causal_mask, inv_freq, rope_table
from specdec.proposers.eagle.layer import KV, EagleLayer


class EagleDecoder:
    @torch.no_grad()
    def __init__(self, layer: EagleLayer) -> None:
        self.heads, self.hd = layer.heads, layer.hd
        hidden = self.heads * self.hd
        wq, wk, wv = layer.qkv.weight.detach().split(hidden)
        w_gate, w_up = layer.gate_up.weight.detach().chunk(2)
        self.fc = P.Linear(layer.fc.weight, layer.fc.bias)
        self.body = FusedLayer(
            wq, wk, wv, layer.o.weight.detach(), w_gate, w_up, layer.down.weight.detach(),
            layer.ln1.detach(), layer.ln2.detach(), self.heads, self.heads, layer.eps,
        )  # fmt: skip
        self.inv = inv_freq(self.hd, layer.theta, wq.device)
        self.dtype, self.device = wq.dtype, wq.device
        self.cos = self.sin = torch.empty(0, 2 * hidden, dtype=self.dtype, device=self.device)

    def rope(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The rotary cos and sin rows at positions ``pos`` (the table grows as needed)."""
        need = int(pos.max()) + 1
        if need > self.cos.shape[0]:
            n = max(need, 2 * self.cos.shape[0], 256)
            self.cos, self.sin = rope_table(self.inv, n, 2 * self.heads, dtype=self.dtype)
        return self.cos[pos], self.sin[pos]

    def new_kv(self, capacity: int) -> KV:
        return KV(self.heads, self.hd, capacity, self.dtype, self.device)

    def attend(self, f: torch.Tensor, e: torch.Tensor, pos: torch.Tensor, kv: KV, mask: torch.Tensor | None):
        n, L = f.shape[0], kv.length
        x = self.fc(torch.cat([f, e], dim=-1))
        cos, sin = self.rope(pos)
        kv.ensure(L + n)
        mask = causal_mask(n, L, x.device) if mask is None else mask
        out = self.body(x, cos, sin, kv.k, kv.v, L, mask)
        kv.length = L + n
        return out


class EagleReference:
    def __init__(self, layer: EagleLayer) -> None:
        self.layer, self.heads, self.hd = layer, layer.heads, layer.hd
        w = layer.qkv.weight
        self.dtype, self.device = w.dtype, w.device

    def new_kv(self, capacity: int) -> KV:
        return KV(self.heads, self.hd, capacity, self.dtype, self.device)

    def attend(self, f: torch.Tensor, e: torch.Tensor, pos: torch.Tensor, kv: KV, mask: torch.Tensor | None):
        n, L, layer = f.shape[0], kv.length, self.layer
        x = layer.fc(torch.cat([f, e], dim=-1))
        q, k, v = layer.qkv_at(x, pos)  # [heads, n, hd]
        kv.ensure(L + n)
        kv.k[:, L : L + n], kv.v[:, L : L + n] = k, v
        mask = causal_mask(n, L, x.device) if mask is None else mask
        att = F.scaled_dot_product_attention(q[None], kv.k[None, :, : L + n], kv.v[None, :, : L + n], attn_mask=mask)
        kv.length = L + n
        return layer.out(x, att[0])
