"""The batch target's lean forward: ragged rows through ``lean.FusedLayer``'s weights, one forward.

Why: on the shipped target a transformers forward is mostly per-op overhead (docs/bench.md), and
the single-request path already scores through the lean target (``specdec/models/lean_target.py``) where
calibration finds it faster. The batch path must not pay more for a row than the solo path does
("single-request speed unchanged"), so it runs the same fused layers on the same weights (the
engine's ``LeanTarget``: nothing is copied), writing the ``SlotCache``'s own buffers, so ``keep``,
``move`` and a switch between the two forwards keep the cache valid.

Contract: ``LeanRows(lean, capacity)``; ``hidden(cache, lo, rows, mask)`` where ``rows[b]`` is
``(tokens, positions, start, chain)`` for slot ``lo + b`` or None (the slot takes no part):
``tokens`` [q_b] long go to cache indices ``start .. start + q_b - 1`` at rotary ``positions``
[q_b]; ``mask(bs)`` gives the additive mask [len(bs), 1, Q, T] of the rows ``bs`` (indices into
``rows``; ``BatchTarget._inputs``: each row's own prefix and its own chain or tree, padding
blocked), or None when the one participating row is a chain. Returns the final-norm hidden states
[B, Q, H] (what ``get_decoder()(...).last_hidden_state`` gives; padded queries are zero).
- One participating row runs ``LeanTarget.hidden``'s own computation on its slot's views (the
  causal bool mask or None for a chain, the row's additive tree mask otherwise): a batch of one
  costs what a solo step does and gives its floats.
- More rows: the linears see the real tokens flattened across rows (no padding), so a prefill
  chunk and the running rows' steps share ONE pass over the weights; attention is one
  ``scaled_dot_product_attention`` per ``Group``: rows of at most ``SHORT`` tokens (decode steps,
  drafts, trees) together, longer ones (prefill chunks) together, so a chunk's queries do not pad
  the decoding rows.
- ``native_hidden(cache, lo, rows, seen)``: the same through the native loops (on a 4-bit target
  whose solo forward is "native"): one call for every row of every slot, the linears reading each
  weight block once for all of them, and every row's floats those of its solo forward. ``seen(b)``
  gives a tree row's per-query visible lists among its new tokens (``tree.visible_nodes``).
Exactness: as for the lean target, the verifier compares tokens; docs/batching.md says where a
near-tie could flip in principle and tests check the shipped prompts. On the native loops there is
no such near-tie: a request's logits in a batch are bit for bit its solo ones.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from specdec.models.lean import causal_mask, rope_table
from specdec.models.slots import SlotCache


class LeanRows:
    @torch.inference_mode()
    def __init__(self, lean, capacity: int) -> None:
        self.lean, self.layers, self.eps = lean, lean.layers, lean.eps
        self.H, self.KV, self.hd = lean.n_heads, lean.n_kv, lean.head_dim
        self.embed, self.norm = lean.embed, lean.norm
        self.cos, self.sin = rope_table(lean.inv_freq, capacity, self.H + self.KV, lean.rope_scale, lean.dtype)

    def _buffers(self, cache: SlotCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each layer's [slots, KV, capacity, hd] keys and values (allocated once, as a transformers
        forward would at its first update)."""
        return cache.buffers(self.embed.new_zeros((1, self.KV, 1, self.hd)))

    @torch.inference_mode()
    def hidden(self, cache: SlotCache, lo: int, rows: list, mask: torch.Tensor | None) -> torch.Tensor:
        real = [b for b, r in enumerate(rows) if r is not None]
        Q = max(len(rows[b][0]) for b in real)
        bufs = self._buffers(cache)
        if len(real) == 1:
            b = real[0]
            m = None if mask is None else (mask([b])[0, 0] if callable(mask) else mask[b, 0])
            h = self._one(bufs, lo + b, *rows[b], m)
            if len(rows) == 1:
                return h[None]
            out = h.new_zeros((len(rows), Q, h.shape[-1]))
            out[b, : h.shape[0]] = h
            return out
        return self._many(bufs, lo, rows, real, Q, mask)

    @torch.inference_mode()
    def native_hidden(self, cache: SlotCache, lo: int, rows: list, seen) -> torch.Tensor:
        """``hidden`` through the native loops (``LeanTarget.native()``, a row-exact format): every
        row's floats are those the solo target's native forward gives it (prefill chunks too: the
        loops are row-exact), so a request in a batch emits its solo tokens."""
        real = [b for b, r in enumerate(rows) if r is not None]
        Q = max(len(rows[b][0]) for b in real)
        bufs = self._buffers(cache)
        tokens, positions, slot, start, at, visible = [], [], [], [], [], []
        for b in real:
            tok, pos, L, chain = rows[b]
            n = tok.shape[0]
            tokens.append(tok)
            positions.append(pos)
            slot += [lo + b] * n
            start += [L] * n
            at += range(L, L + n)
            visible += [None] * n if chain else seen(b)
        pos = torch.cat(positions)
        x = self.embed[torch.cat(tokens)]
        native = self.lean.native()
        h = native.norm(native.rows_slots(x, self.cos[pos], self.sin[pos], bufs, slot, start, at, visible), self.norm)
        out = h.new_zeros((len(rows), Q, h.shape[-1]))
        i = 0
        for b in real:
            n = rows[b][0].shape[0]
            out[b, :n] = h[i : i + n]
            i += n
        return out

    def _one(self, bufs, s: int, tokens, positions, L: int, chain: bool, mask) -> torch.Tensor:
        """``LeanTarget.hidden`` on slot ``s``'s views: the solo step's computation."""
        T = tokens.shape[0]
        if chain:
            cos, sin = self.cos[L : L + T], self.sin[L : L + T]
            att = causal_mask(T, L, tokens.device)
        else:
            cos, sin = self.cos[positions], self.sin[positions]
            att = mask[:T, : L + T]
        x = self.embed[tokens]
        for layer, (k, v) in zip(self.layers, bufs):
            x = layer(x, cos, sin, k[s], v[s], L, att)
        return F.rms_norm(x, (x.shape[-1],), self.norm, self.eps)

    def _many(self, bufs, lo: int, rows: list, real: list[int], Q: int, mask) -> torch.Tensor:
        dev = self.embed.device
        B = len(rows)
        lens = [rows[b][0].shape[0] for b in real]
        row_of = torch.tensor([b for b, n in zip(real, lens) for _ in range(n)], device=dev)
        col = torch.cat([torch.arange(n, device=dev) for n in lens])
        at = torch.cat([rows[b][2] + torch.arange(n, device=dev) for b, n in zip(real, lens)])
        pos = torch.cat([rows[b][1] for b in real]).to(dev)
        x = self.embed[torch.cat([rows[b][0] for b in real]).to(dev)]
        cos, sin = self.cos[pos], self.sin[pos]
        groups = self._groups(lo, rows, real, lens, mask)
        for layer, (k, v) in zip(self.layers, bufs):
            x = ragged_layer(layer, x, cos, sin, (k, v), (row_of + lo, at), groups)
        out = x.new_zeros((B, Q, x.shape[-1]))
        out[row_of, col] = F.rms_norm(x, (x.shape[-1],), self.norm, self.eps)
        return out

    def _groups(self, lo: int, rows: list, real: list[int], lens: list[int], mask) -> list[Group]:
        """Attention groups: the short rows (decode steps) together, the long ones (prefill chunks)
        together, so a chunk's many queries do not pad every decoding row. ``mask(bs)`` gives the
        additive mask [len(bs), 1, Q, T] of the rows ``bs`` (a tensor: the rows are all of them)."""
        dev, starts, out = self.embed.device, [0], []
        for n in lens:
            starts.append(starts[-1] + n)
        first = dict(zip(real, starts))
        short = [b for b, n in zip(real, lens) if n <= SHORT]
        long_ = [b for b, n in zip(real, lens) if n > SHORT]
        for bs in (short, long_) if short and long_ else (real,):
            n = [rows[b][0].shape[0] for b in bs]
            tok = torch.cat([first[b] + torch.arange(m, device=dev) for b, m in zip(bs, n)])
            g_row = torch.tensor([i for i, m in enumerate(n) for _ in range(m)], device=dev)
            g_col = torch.cat([torch.arange(m, device=dev) for m in n])
            view = slot_view([lo + b for b in bs], dev)
            m = mask(bs) if callable(mask) else mask
            out.append(Group(tok, (g_row, g_col), (len(bs), max(n)), view, m.shape[-1], m.to(dev)))
        return out


SHORT = 16  # rows of at most this many tokens attend together (decode steps, drafts, trees)


class Group(NamedTuple):
    """Rows whose queries attend in one call: ``tok`` their tokens' indices in the flattened batch,
    ``at`` (row, column) of each in a [B, Q] grid (``shape``), ``view`` their slots (a slice when
    contiguous), ``T`` keys, ``mask`` [B, 1, Q, T]."""

    tok: torch.Tensor
    at: tuple[torch.Tensor, torch.Tensor]
    shape: tuple[int, int]
    view: slice | torch.Tensor
    T: int
    mask: torch.Tensor


def slot_view(slots: list[int], dev) -> slice | torch.Tensor:
    """``Group.view`` of these cache slots: a slice when they are contiguous (no gather), else an index."""
    contiguous = slots == list(range(slots[0], slots[0] + len(slots)))
    return slice(slots[0], slots[0] + len(slots)) if contiguous else torch.tensor(slots, device=dev)


def ragged_layer(layer, x, cos, sin, kv, write, groups: list[Group]) -> torch.Tensor:
    """One ``lean.FusedLayer`` over tokens flattened across rows: x [N, hidden] with per-token
    rotary tables cos/sin [N, D]; keys/values written at ``kv[0/1][write[0], :, write[1]]`` (slot,
    cache index per token); each ``Group``'s queries attend over its slots' first ``T`` keys."""
    H, KV, hd, N = layer.H, layer.KV, layer.hd, x.shape[0]
    qk, vv = layer.rotary(layer.qkv(F.rms_norm(x, (x.shape[-1],), None, layer.eps)), cos, sin)
    kc, vc = kv
    kc[write[0], :, write[1]] = qk[:, H * hd :].view(N, KV, hd)
    vc[write[0], :, write[1]] = vv.reshape(N, KV, hd)
    qs = qk[:, : H * hd].view(N, H, hd)
    if len(groups) == 1:
        att = _attend(qs, kc, vc, groups[0], KV != H)
    else:
        att = x.new_empty((N, H * hd))
        for g in groups:
            att[g.tok] = _attend(qs[g.tok], kc, vc, g, KV != H)
    return layer.finish(x, att)


def _attend(qs, kc, vc, g: Group, gqa: bool) -> torch.Tensor:
    N, H, hd = qs.shape
    q = qs.new_zeros(*g.shape, H, hd)
    q[g.at] = qs
    K, V = kc[g.view, :, : g.T], vc[g.view, :, : g.T]
    att = F.scaled_dot_product_attention(q.transpose(1, 2), K, V, attn_mask=g.mask, enable_gqa=gqa)
    return att.transpose(1, 2)[g.at].reshape(N, H * hd)
