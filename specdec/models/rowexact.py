"""The verifier's forward, row for row the plain step's arithmetic: one attention call per row.

Why: at temperature 0 a speculative method must emit exactly the tokens of plain decoding with
the same weights. The verifier scores the pending token and k drafted ones in one forward of
k + 1 rows; plain decoding scores one row per step. Every other op of the lean layer then works
row by row: the int8 and int4 linears compute each output row by the same loop whatever the row
count (``quant.row_invariant``), norms and activations are per row. Attention is not: the CPU's
``scaled_dot_product_attention`` over k + 1 queries blocks its work by the query count and
reads keys through a mask, so a row's rounding differs from the one-query call that plain
decoding makes. Here each row makes that very call: one query, the keys it sees laid out
contiguously from slot 0, no mask. For a tree (Medusa, EAGLE), a node sees the prefix and its
ancestors, which are not contiguous in the cache; they are copied, in order, into the slots
right after the prefix (where plain decoding would have them) for that row's call, and the
tree's own keys are put back afterwards. The cost is k + 1 small calls per layer instead of
one: a few milliseconds per step, measured by ``specdec bench`` as part of the verify cost r(k).

Contract: ``attend_rows(layer, x, cos, sin, k, v, start, visible)`` is ``lean.FusedLayer.__call__``
for T = x.shape[0] new tokens at slots [start, start + T) with ``visible`` None (a chain: row i
sees slots [0, start + i]) or a list per row of the new tokens' indices it sees (sorted, its own
last); each row's output is bit for bit what the same layer gives that token alone, as the last
token of a cache holding the prefix and the visible tokens in order.
``visible_rows(mask, start)`` reads those lists from an additive tree mask [1, 1, T, start + T].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def visible_rows(mask: torch.Tensor, start: int) -> list[list[int]]:
    seen = mask[0, 0, :, start:] == 0
    return [torch.nonzero(row).view(-1).tolist() for row in seen]


def _one(q, k, v, n: int, gqa: bool) -> torch.Tensor:
    """One query [H, 1, hd] over the first n slots: the plain step's own call."""
    return F.scaled_dot_product_attention(q[None], k[None, :, :n], v[None, :, :n], enable_gqa=gqa)[0]


def attend_rows(layer, x, cos, sin, k, v, start: int, visible: list[list[int]] | None) -> torch.Tensor:
    T, H, KV, hd = x.shape[0], layer.H, layer.KV, layer.hd
    end, gqa = start + T, KV != H
    qk, vv = layer.rotary(layer.qkv(F.rms_norm(x, (x.shape[-1],), None, layer.eps)), cos, sin)
    k[:, start:end] = qk[:, H * hd :].view(T, KV, hd).transpose(0, 1)
    v[:, start:end] = vv.view(T, KV, hd).transpose(0, 1)
    q = qk[:, : H * hd].view(T, H, hd).transpose(0, 1)
    att = x.new_empty((T, H * hd))
    if visible is None:
        for i in range(T):
            att[i] = _one(q[:, i : i + 1].contiguous(), k, v, start + i + 1, gqa).transpose(0, 1).reshape(-1)
        return layer.finish(x, att)
    tk, tv = k[:, start:end].clone(), v[:, start:end].clone()
    for i, seen in enumerate(visible):
        n = len(seen)
        moved = seen != list(range(n))  # the ancestors go where plain decoding has them
        if moved:
            idx = torch.tensor(seen)
            k[:, start : start + n], v[:, start : start + n] = tk[:, idx], tv[:, idx]
        att[i] = _one(q[:, i : i + 1].contiguous(), k, v, start + n, gqa).transpose(0, 1).reshape(-1)
        if moved:
            k[:, start : start + n], v[:, start : start + n] = tk[:, :n], tv[:, :n]
    return layer.finish(x, att)
