"""A preallocated KV cache of fixed slots for ragged batched forwards (transformers ``Cache``).

Contract:
- ``SlotCache(n_layers, slots, capacity)``: per layer, keys and values ``[slots, heads, capacity,
  head_dim]`` allocated at the first forward and never reallocated. ``lengths[s]`` is how many
  positions slot ``s`` holds.
- ``plan(lo, starts, width)`` before a forward over the rows ``lo .. lo + len(starts) - 1``: each
  layer's ``update`` writes row b's new keys/values at ``starts[b] ..`` of slot ``lo + b`` and hands
  attention the view ``[lo : lo + B, :, :width]`` (no copy: active rows sit in contiguous slots).
  Positions a row does not own inside that view are the caller's to mask out.
- ``keep(s, start, rows)``: compact slot ``s``'s positions ``start + rows[i]`` to ``start + i`` and
  set its length: how a row commits its accepted tree path. ``move(src, dst)``: copy a slot's valid
  positions to another slot (the scheduler keeps its running rows in slots 0..n-1).
- ``buffers(like)``: each layer's whole keys and values ``[slots, heads, capacity, head_dim]``,
  allocated now (shaped and typed as ``like``, ``[1, heads, 1, head_dim]``) if no forward has yet:
  for a forward that writes its slots itself (``lean_rows.py``) without reaching into the layers.
This module and ``cache.py`` (the single request's growing cache) are the only two that touch
transformers' ``Cache`` internals; everything else calls their functions.
Why slots of one size: a view over contiguous slots needs no gather per step, and a fixed
allocation is the memory bound (``docs/batching.md``).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer


class SlotLayer(DynamicLayer):
    def __init__(self, owner: SlotCache) -> None:
        super().__init__()
        self.owner = owner
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        _, h, _, dk = key_states.shape
        o = self.owner
        self._k = key_states.new_zeros((o.slots, h, o.capacity, dk))
        self._v = value_states.new_zeros((o.slots, h, o.capacity, value_states.shape[-1]))
        self.device = key_states.device
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        o = self.owner
        q = key_states.shape[-2]
        for b, start in enumerate(o.starts):
            n = min(q, o.capacity - start)
            self._k[o.lo + b, :, start : start + n].copy_(key_states[b, :, :n])
            self._v[o.lo + b, :, start : start + n].copy_(value_states[b, :, :n])
        rows = slice(o.lo, o.lo + len(o.starts))
        self.keys, self.values = self._k[rows, :, : o.width], self._v[rows, :, : o.width]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return 0  # rows are ragged: callers always pass position ids and a 4-D mask

    def keep(self, s: int, start: int, idx: torch.Tensor) -> None:
        m = int(idx.numel())
        self._k[s, :, start : start + m] = self._k[s].index_select(1, idx + start)
        self._v[s, :, start : start + m] = self._v[s].index_select(1, idx + start)

    def move(self, src: int, dst: int, n: int) -> None:
        self._k[dst, :, :n].copy_(self._k[src, :, :n])
        self._v[dst, :, :n].copy_(self._v[src, :, :n])


class SlotCache(Cache):
    def __init__(self, n_layers: int, slots: int, capacity: int) -> None:
        self.slots, self.capacity = slots, capacity
        self.lengths = [0] * slots
        self.lo, self.starts, self.width = 0, [], 0
        super().__init__(layers=[SlotLayer(self) for _ in range(n_layers)])

    def plan(self, lo: int, starts: list[int], width: int) -> None:
        self.lo, self.starts, self.width = lo, list(starts), min(width, self.capacity)

    def keep(self, s: int, start: int, rows: list[int]) -> None:
        if rows != list(range(len(rows))):
            idx = torch.tensor(rows, dtype=torch.long, device=self.layers[0]._k.device)
            for layer in self.layers:
                layer.keep(s, start, idx)
        self.lengths[s] = start + len(rows)

    def move(self, src: int, dst: int) -> None:
        n = self.lengths[src]
        if self.layers[0].is_initialized and n:
            for layer in self.layers:
                layer.move(src, dst, n)
        self.lengths[dst], self.lengths[src] = n, 0

    def buffers(self, like: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        if not self.layers[0].is_initialized:
            for layer in self.layers:
                layer.lazy_initialization(like, like)
        return [(la._k, la._v) for la in self.layers]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for la in self.layers if la.is_initialized for t in (la._k, la._v))
