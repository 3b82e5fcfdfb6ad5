"""A lean ragged forward of a plain Llama over many KV slots: the batch's draft model.

Why: the draft model is a few layers where a transformers forward is nearly all per-op overhead;
running it once per row and drafting position costs rows x k forwards per step. This runs ONE
forward per drafting position over every draft row, with ``lean.FusedLayer``'s weights (RMSNorm
folded, RoPE fused into the QKV projection: the same layer body as the single-request lean draft,
run over ragged rows by ``lean_rows.ragged_layer`` as the batch target's layers are)
and tokens flattened across rows, so the linears see no padding.

Contract: ``RaggedLlama(model, slots, capacity, lean=None)`` (``supports(model)`` as ``LeanLlama``)
keeps keys/values ``[slots, kv_heads, capacity, head_dim]`` per layer, allocated once. ``lean``: a
``LeanLlama`` of the same model whose fused weights it runs (the single-request draft's, so the
weight precision calibration set there, ``fast/lowp.py``, is the batch rows' too); default: its own.
``forward(rows)``: ``rows[b] = (slot, tokens, start)`` appends ``tokens`` to slot ``slot`` at
positions ``start ..`` (causal among themselves, seeing the slot's positions ``[0, start)``) and
returns the float32 logits after each row's last token, ``[B, V]``. A slot's positions at or after
``start`` are overwritten; the caller tracks what each slot holds (``proposers/batch_draft.py``). One row
takes ``LeanLlama.forward``'s own path on its slot's cache (no index building: a batch of one
drafts as fast as the single-request draft).
Exactness never depends on this module: the verifier uses whatever q was sampled from.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specdec.models.lean import LeanLlama, causal_mask, rope_table
from specdec.models.lean_rows import Group, ragged_layer, slot_view


class RaggedLlama:
    supports = staticmethod(LeanLlama.supports)

    @torch.inference_mode()
    def __init__(self, model: torch.nn.Module, slots: int, capacity: int, lean: LeanLlama | None = None) -> None:
        lean = lean if lean is not None else LeanLlama(model, capacity=1)  # its layers and head; not its cache
        self.layers, self.head, self.embed, self.eps = lean.layers, lean.head, lean.embed, lean.eps
        self.H, self.KV, self.hd = lean.n_heads, lean.n_kv, lean.head_dim
        self.capacity = capacity
        reps = self.H + self.KV
        self.cos, self.sin = rope_table(lean.inv_freq, capacity, reps, lean.rope_scale, lean.dtype)
        shape = (len(self.layers), slots, self.KV, capacity, self.hd)
        self.k = torch.zeros(shape, dtype=lean.dtype, device=lean.device)
        self.v = torch.zeros_like(self.k)
        self.device = lean.device

    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()

    @torch.inference_mode()
    def forward(self, rows: list[tuple[int, list[int], int]]) -> torch.Tensor:
        if len(rows) == 1:
            return self._one(*rows[0])
        dev = self.device
        lens = [len(t) for _, t, _ in rows]
        B, Q = len(rows), max(lens)
        T = max(s + n for (_, _, s), n in zip(rows, lens))
        if T > self.capacity:
            raise ValueError(f"draft slot overflow: {T} positions, capacity {self.capacity}")
        row_l = [b for b, n in enumerate(lens) for _ in range(n)]
        col_l = [i for n in lens for i in range(n)]
        row_of, col = torch.tensor(row_l, device=dev), torch.tensor(col_l, device=dev)
        pos = torch.tensor([rows[b][2] + i for b, i in zip(row_l, col_l)], device=dev)
        slots = [s for s, _, _ in rows]
        slot_of = torch.tensor([slots[b] for b in row_l], device=dev)
        tokens = torch.tensor([t for _, ts, _ in rows for t in ts], device=dev)
        starts = torch.tensor([s for _, _, s in rows], device=dev)
        # query i of row b sees keys [0, start_b + i]; padded queries (i >= n_b) are discarded
        keys = torch.arange(T, device=dev)
        qi = torch.arange(Q, device=dev)
        mask = (keys[None, None, :] <= (starts[:, None, None] + qi[None, :, None]))[:, None]
        group = Group(torch.arange(len(row_l), device=dev), (row_of, col), (B, Q), slot_view(slots, dev), T, mask)
        x = self.embed[tokens]
        cos, sin = self.cos[pos], self.sin[pos]
        for i, layer in enumerate(self.layers):
            x = ragged_layer(layer, x, cos, sin, (self.k[i], self.v[i]), (slot_of, pos), [group])
        last = torch.tensor(lens, device=dev).cumsum(0) - 1
        return self.head(F.rms_norm(x[last], (x.shape[-1],), None, self.eps)).float()

    def _one(self, slot: int, tokens: list[int], start: int) -> torch.Tensor:
        """One row: ``lean.LeanLlama.forward``'s own computation on the slot's cache views."""
        T = len(tokens)
        if start + T > self.capacity:
            raise ValueError(f"draft slot overflow: {start + T} positions, capacity {self.capacity}")
        x = self.embed[torch.tensor(tokens, device=self.device)]
        cos, sin = self.cos[start : start + T], self.sin[start : start + T]
        mask = causal_mask(T, start, self.device)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, self.k[i, slot], self.v[i, slot], start, mask)
        return self.head(F.rms_norm(x[-1:], (x.shape[-1],), None, self.eps)).float()
