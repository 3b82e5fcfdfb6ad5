"""EAGLE's decoding forward with fewer, cheaper tensor ops than the training module's.

Why: drafting calls the EAGLE layer once per tree level over one to a few rows, where a forward
is almost all per-op overhead (measured with 2 threads: the module's ``attend`` over 2 rows
costs about 0.35 ms, most of it outside the matmuls). This class computes the same function as
``EagleLayer.attend`` from the same weights with:

- the RMSNorm weights folded into the columns of the linear after each norm;
- rotary embeddings fused into the QKV projection: its weight also holds rotate_half(Wq) and
  rotate_half(Wk), so RoPE is one multiply and one ``addcmul`` against a per-position table;
- 4-D inputs to ``scaled_dot_product_attention`` (the CPU flash kernel; 3-D inputs take the
  slower math path);
- each linear through ``packed.Linear``, which picks oneDNN packed or MKL per weight size.

Contract: ``EagleDecoder(layer)`` is built from the trained layer's final weights (the fused
ones are copies, the others shared, so change the module before building, never after); ``attend(f, e, pos, kv, mask)`` and ``new_kv(capacity)`` behave as ``EagleLayer``'s
(same KV layout), equal to float tolerance (tests/test_heads.py).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import packed as P
from ..lean import rotate_rows
from .modules import KV, EagleLayer, rope_table


class EagleDecoder:
    @torch.no_grad()
    def __init__(self, layer: EagleLayer) -> None:
        self.heads, self.hd, self.eps, self.theta = layer.heads, layer.hd, layer.eps, layer.theta
        hidden = self.heads * self.hd
        wq, wk, wv = layer.qkv.weight.detach().split(hidden)
        qkv = torch.cat([wq, wk, rotate_rows(wq, self.heads, self.hd), rotate_rows(wk, self.heads, self.hd), wv])
        self.fc = P.Linear(layer.fc.weight, layer.fc.bias)
        self.qkv = P.Linear(qkv * layer.ln1.detach())
        self.o = P.Linear(layer.o.weight)
        self.gate_up = P.Linear(layer.gate_up.weight.detach() * layer.ln2.detach())
        self.down = P.Linear(layer.down.weight)
        self.dtype, self.device = wq.dtype, wq.device
        self._table = torch.empty(0, 4 * hidden, dtype=self.dtype, device=self.device)

    def _rope(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [n, 2 * hidden] at ``pos``, tiled over the q and k heads."""
        need = int(pos.max()) + 1
        if need > self._table.shape[0]:
            cos, sin = rope_table(self.hd, self.theta, max(need, 2 * self._table.shape[0], 256), self.device)
            reps = 2 * self.heads
            self._table = torch.cat([cos.repeat(1, reps), sin.repeat(1, reps)], dim=-1).to(self.dtype)
        return self._table[pos].chunk(2, dim=-1)

    def new_kv(self, capacity: int) -> KV:
        return KV(self.heads, self.hd, capacity, self.dtype, self.device)

    def attend(self, f: torch.Tensor, e: torch.Tensor, pos: torch.Tensor, kv: KV,
               mask: torch.Tensor | None) -> torch.Tensor:
        """n new inputs [n, H] at positions ``pos`` [n] into slots kv.length..+n; ``mask`` [n,
        kv.length + n] bool (True = visible) or None for causal. Advances kv.length."""
        n, L, H, hd = f.shape[0], kv.length, self.heads, self.hd
        D = 2 * H * hd
        x = self.fc(torch.cat([f, e], dim=-1))
        y = self.qkv(F.rms_norm(x, (x.shape[-1],), None, self.eps))
        cos, sin = self._rope(pos)
        qk = torch.addcmul(y[:, :D] * cos, y[:, D:2 * D], sin)
        kv.ensure(L + n)
        kv.k[:, L:L + n] = qk[:, H * hd:].view(n, H, hd).transpose(0, 1)
        kv.v[:, L:L + n] = y[:, 2 * D:].view(n, H, hd).transpose(0, 1)
        if mask is None and n > 1:
            mask = torch.ones(n, L + n, dtype=torch.bool, device=x.device).tril(diagonal=L)
        q = qk[:, : H * hd].view(n, H, hd).transpose(0, 1)
        att = F.scaled_dot_product_attention(q[None], kv.k[None, :, :L + n], kv.v[None, :, :L + n], attn_mask=mask)
        kv.length = L + n
        x = x + self.o(att[0].transpose(0, 1).reshape(n, H * hd))
        g, u = self.gate_up(F.rms_norm(x, (x.shape[-1],), None, self.eps)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)
