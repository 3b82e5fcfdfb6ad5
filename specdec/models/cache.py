"""The single request's KV cache: with ``slots.py`` (the batch's fixed slots), the only module that
touches transformers' Cache internals.

Contract:
- ``new_cache(n_layers, capacity)`` returns a ``transformers.Cache`` whose layers write keys and
  values in place into preallocated storage (doubling when full) and hand attention a view of the
  first ``length`` slots: appending never re-copies the whole cache as ``torch.cat`` does in
  ``DynamicLayer``, and truncation is an O(1) change of length.
- ``grow(buf, used, need, dim)``: the one growable-buffer rule (also used outside this module).
- ``reserve(cache, need, n_kv, head_dim, like)``: per layer the 3-D key and value buffers
  [n_kv, capacity >= need, head_dim] of batch row 0 (for a forward that writes slots itself, the
  lean target); ``advance(cache, n)`` then counts n more positions as written.
- ``length(cache)``, ``truncate(cache, n)`` (keep the first n positions) and
  ``keep(cache, start, slots)`` (move the positions ``start + s`` for s in ``slots``, in order, to
  ``start, start + 1, ...`` and drop everything after: how a tree path is committed).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer


def grow(buf: torch.Tensor, used: int, need: int, dim: int, minimum: int = 1) -> torch.Tensor:
    """``buf`` if it holds ``need`` entries along ``dim``, else a buffer with at least double the
    capacity (and ``minimum``) whose first ``used`` entries are copied: the engine's one growable
    buffer (KV caches, hidden states), so appending never re-copies everything as ``torch.cat`` does."""
    cap = buf.shape[dim]
    if need <= cap:
        return buf
    shape = list(buf.shape)
    shape[dim] = max(need, 2 * cap, minimum)
    out = buf.new_empty(shape)
    if used:
        out.narrow(dim, 0, used).copy_(buf.narrow(dim, 0, used))
    return out


class GrowingLayer(DynamicLayer):
    """A DynamicLayer backed by a preallocated buffer; ``keys``/``values`` are views of it."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = max(1, capacity)
        self.length = 0
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        b, h, _, dk = key_states.shape
        self._k = key_states.new_empty((b, h, self.capacity, dk))
        self._v = value_states.new_empty((b, h, self.capacity, value_states.shape[-1]))
        self.length = 0
        self.is_initialized = True

    # ``keys``/``values`` are computed when read: only transformers' attention reads them, and the
    # lean and native forwards write the buffer directly, so two views per layer per step (60 on
    # SmolLM2, about 0.3 ms of a 4-5 ms step) were made for nobody. Assigning them is refused (the
    # buffer is the state; write through ``update``/``keep``), except the mixin's initial None.
    @property
    def keys(self) -> torch.Tensor | None:
        return None if self._k is None else self._k[:, :, : self.length]

    @keys.setter
    def keys(self, value) -> None:
        _refuse(value)

    @property
    def values(self) -> torch.Tensor | None:
        return None if self._v is None else self._v[:, :, : self.length]

    @values.setter
    def values(self, value) -> None:
        _refuse(value)

    def _grow(self, need: int) -> None:
        self._k, self._v = grow(self._k, self.length, need, 2), grow(self._v, self.length, need, 2)
        self.capacity = self._k.shape[2]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        if self.length + n > self.capacity:
            self._grow(self.length + n)
        self._k[:, :, self.length : self.length + n].copy_(key_states)
        self._v[:, :, self.length : self.length + n].copy_(value_states)
        self.length += n
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def crop(self, tokens_to_remove: int) -> None:
        if self.is_initialized:
            self.length = max(0, self.length - abs(tokens_to_remove))

    def reset(self) -> None:
        self.length = 0

    def keep(self, start: int, slots: torch.Tensor) -> None:
        if not self.is_initialized:
            return
        idx = slots + start
        m = int(idx.numel())
        self._k[:, :, start : start + m] = self._k.index_select(2, idx)
        self._v[:, :, start : start + m] = self._v.index_select(2, idx)
        self.length = start + m


def _refuse(value) -> None:
    if value is not None:
        raise TypeError("GrowingLayer's keys and values are views of its buffer; write through update() or keep()")


def new_cache(n_layers: int, capacity: int) -> Cache:
    return Cache(layers=[GrowingLayer(capacity) for _ in range(n_layers)])


def reserve(cache: Cache, need: int, n_kv: int, head_dim: int, like: torch.Tensor) -> list[tuple]:
    out = []
    for layer in cache.layers:
        if not layer.is_initialized:
            layer.lazy_initialization(like.new_empty((1, n_kv, 0, head_dim)), like.new_empty((1, n_kv, 0, head_dim)))
        if need > layer.capacity:
            layer._grow(need)
        out.append((layer._k[0], layer._v[0]))
    return out


def advance(cache: Cache, n: int) -> None:
    for layer in cache.layers:
        layer.length += n


def length(cache: Cache) -> int:
    return cache.layers[0].get_seq_length() if cache.layers else 0


def truncate(cache: Cache, n: int) -> None:
    """Keep the first ``n`` positions."""
    for layer in cache.layers:
        layer.crop(-(layer.get_seq_length() - n))


def keep(cache: Cache, start: int, slots: list[int]) -> None:
    """Compact positions ``start + slots[i]`` to ``start + i``; drop the rest. A contiguous
    ``slots == [0, 1, ..., m-1]`` is a plain truncation and copies nothing."""
    if slots == list(range(len(slots))):
        truncate(cache, start + len(slots))
        return
    idx = torch.tensor(slots, dtype=torch.long, device=cache.layers[0]._k.device)
    for layer in cache.layers:
        layer.keep(start, idx)
