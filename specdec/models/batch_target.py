"""The target over many rows: chunked prefill of one slot, ONE ragged scoring forward for all rows,
per-row commit of the accepted path.

Contract (per slot s, the batched form of ``specdec/models/target.py``'s invariant I1): between steps the
cache slot holds the KV of exactly ``ids[s]``, every committed token of that row except its pending
one; ``hidden(s)`` is the LM head's input at each of those positions (what Medusa and EAGLE read).
- ``prefill(s, ids, chunk)`` feeds at most ``chunk`` more tokens of ``ids[:-1]``; True when done.
- ``score(entries)``: ``entries[b]`` is ``(pending, draft)`` for slot b, or None for a slot that
  takes no part (still prefilling). One forward over ``[B, Q]`` tokens, Q = the longest
  ``1 + draft.n``; row b's query i sits at position ``len(ids[b]) + depth(i)`` and sees, through
  one additive mask ``[B, 1, Q, T]``, its own prefix and its own tree ancestors, nothing else
  (padding and other rows' garbage are blocked). Returns per slot the float32 logits
  ``[1 + n, V]`` (row 0 after the pending token), or None.
- ``commit(s, path)`` keeps the pending token and the accepted nodes of slot s, in order.
- ``step(entries, feeds)``: ``score`` and prefill chunks (``chunks(rows, chunk)``) in one forward.
- ``move(src, dst)`` relocates a row (the scheduler keeps running rows in slots 0..n-1); ``free``.
``paths`` are the forwards it can run, as ``specdec/models/target.py``'s: "hf" (transformers' decoder) and,
given the engine's ``LeanTarget`` (``lean=``), "lean" (``models/lean_rows.py``: the same fused
layers over ragged rows, or on a 4-bit target the native loops, ``use("lean", "native")``);
``use(path, rows)`` picks one (the scheduler takes the solo target's calibrated ``Forward``, so a
batch runs the weight format and kernels a single request runs). ``head``: the LM head to apply
(the solo target's packed head; default the model's).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from specdec.core.tree import Draft, tree_attention_mask, visible_nodes
from specdec.kernels import why_not
from specdec.models.forward import Forward
from specdec.models.lean_rows import LeanRows
from specdec.models.packed import pack_linears, packed_scope
from specdec.models.slots import SlotCache


class BatchTarget:
    def __init__(
        self, model: torch.nn.Module, slots: int, capacity: int, vocab: int | None = None, lean=None, head=None
    ) -> None:
        self.model = model.eval()
        pack_linears(model)
        self.decoder = model.get_decoder()
        self.lm_head = model.get_output_embeddings()
        self.head = head if head is not None else self.lm_head
        self.lean = LeanRows(lean, capacity) if lean is not None else None
        self.forward = Forward()  # its path is the solo target's (the scheduler copies it at start)
        self.dtype = self.lm_head.weight.dtype
        self.device = self.lm_head.weight.device
        self.cache = SlotCache(model.config.num_hidden_layers, slots, capacity)
        self.capacity, self.vocab = capacity, vocab
        self.ids: list[list[int]] = [[] for _ in range(slots)]
        self._hidden = torch.zeros(slots, capacity, model.config.hidden_size, dtype=self.dtype, device=self.device)
        self._scored: list = [None] * slots
        self._blocked = torch.finfo(self.dtype).min

    @property
    def paths(self) -> tuple[str, ...]:
        return ("hf", "lean") if self.lean is not None else ("hf",)

    def use(self, path: str, rows: str = "") -> None:
        """Run ``path``; ``rows`` "native" (the solo target's row forward, where the lean target built
        it) runs the lean path through the native loops, every row exactly its solo forward."""
        if path not in self.paths:
            raise ValueError(f"batch target path {path!r} not available here: {', '.join(self.paths)}")
        if rows == "native" and (path != "lean" or self.lean.lean.native() is None):
            raise ValueError("the native batch forward needs the lean path on a 4-bit target with native layers")
        fmt = self.lean.lean.fmt if path == "lean" else "fp32"
        if fmt != "fp32" and rows != "native":  # ragged SDPA rows would not be the solo forward's
            raise ValueError(
                f"batching on {fmt} weights runs the native kernels, which did not build here "
                f"({why_not() or 'the solo target runs another forward'}); use --weights fp32"
            )
        self.forward = replace(self.forward, path=path, rows="native" if rows == "native" else "")

    @property
    def path(self) -> str:
        return self.forward.path

    def hidden(self, s: int) -> torch.Tensor:
        return self._hidden[s, : len(self.ids[s])]

    def _run(self, entries: list, lo: int) -> torch.Tensor:
        """The last hidden states [B, Q, H] of one forward over ``entries`` (slots lo ..)."""
        if self.path == "lean":
            rows = [self._row(e, lo + b) for b, e in enumerate(entries)]
            if self.forward.rows == "native":
                return self.lean.native_hidden(self.cache, lo, rows, lambda b: visible_nodes(entries[b][1]))
            one = sum(r is not None for r in rows) == 1
            if one and all(r is None or r[3] for r in rows):  # a lone chain needs no 4-D mask
                return self.lean.hidden(self.cache, lo, rows, None)

            def mask(bs: list[int]) -> torch.Tensor:
                return self._inputs([(lo + b, entries[b]) for b in bs])[2]

            return self.lean.hidden(self.cache, lo, rows, mask)
        return self._forward(lo, *self._batch(entries, lo))

    def _row(self, e, s: int):
        if e is None:
            return None
        pending, draft = e
        L = len(self.ids[s])
        tokens = torch.cat([torch.tensor([pending], dtype=torch.long), draft.tokens.cpu().long()])
        pos = L + (torch.arange(1 + draft.n) if draft.is_chain else torch.tensor([0, *draft.depths()]))
        return tokens.to(self.device), pos.to(self.device), L, draft.is_chain

    def _forward(self, lo: int, ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor, starts: list[int]):
        self.cache.plan(lo, starts, mask.shape[-1])  # mask.shape[-1] <= capacity (see _batch)
        with packed_scope():
            out = self.decoder(
                input_ids=ids.to(self.device),
                position_ids=pos.to(self.device),
                attention_mask=mask.to(self.device),
                cache=self.cache,
                use_cache=True,
            )
        return out.last_hidden_state

    @torch.inference_mode()
    def prefill(self, s: int, ids: list[int], chunk: int) -> bool:
        return self.prefill_many([(s, ids)], chunk)[0]

    @torch.inference_mode()
    def prefill_many(self, rows: list[tuple[int, list[int]]], chunk: int | list[int]) -> list[bool]:
        """One forward feeding each (slot, ids) row at most ``chunk`` (one per row when a list)
        more tokens of ``ids[:-1]``; per row, True once its cache holds all of them. Rows in
        between that are not listed take no part (fully masked)."""
        rests = self.chunks(rows, chunk)
        if rests:
            lo, hi = min(rests), max(rests) + 1
            entries = [(rests[s][0], Draft.chain(rests[s][1:])) if s in rests else None for s in range(lo, hi)]
            self._feed(rests, self._run(entries, lo), lo)
        return [len(self.ids[s]) == len(ids) - 1 for s, ids in rows]

    def chunks(self, rows: list[tuple[int, list[int]]], chunk: int | list[int]) -> dict[int, list[int]]:
        """The next at most ``chunk`` tokens of ``ids[:-1]`` each (slot, ids) row still lacks."""
        rests: dict[int, list[int]] = {}
        chunks = chunk if isinstance(chunk, list) else [chunk] * len(rows)
        for (s, ids), c in zip(rows, chunks):
            L = len(self.ids[s])
            if self.ids[s] != ids[: min(L, len(ids) - 1)]:
                raise RuntimeError("prefill: slot holds other tokens (free it first)")
            rest = ids[L : len(ids) - 1][:c]
            if rest:
                rests[s] = rest
        return rests

    def _feed(self, rests: dict[int, list[int]], h: torch.Tensor, lo: int) -> None:
        for s, rest in rests.items():
            L, q = len(self.ids[s]), len(rest)
            self._hidden[s, L : L + q] = h[s - lo, :q]
            self.ids[s].extend(rest)
            self.cache.lengths[s] = L + q

    @torch.inference_mode()
    def step(self, entries: list, feeds: dict[int, list[int]]) -> list[torch.Tensor | None]:
        """``score(entries)`` and the prefill chunks ``feeds`` (``chunks``' result: tokens each slot's
        cache takes next) in ONE forward: the chunk and the running rows' steps share one pass over
        the weights. Returns ``score``'s list; fed slots get None."""
        n = max([len(entries), *(s + 1 for s in feeds)])
        padded = list(entries) + [None] * (n - len(entries))
        merged = list(padded)
        for s, rest in feeds.items():
            if merged[s] is not None:
                raise ValueError(f"slot {s} both scored and fed")
            merged[s] = (rest[0], Draft.chain(rest[1:]))
        h = self._run(merged, 0)
        self._feed(feeds, h, 0)
        return self._logits(padded, h)

    def _batch(self, entries: list, lo: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
        """Inputs of one forward over slots lo .. lo + len(entries) - 1 (see the module docstring)."""
        return self._inputs(list(enumerate(entries, lo)))

    def _inputs(self, items: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
        """Token ids, positions [B, Q], additive mask [B, 1, Q, T] and prefix lengths of the rows
        ``items[b] = (slot, entry)`` (entry None: the row takes no part). The mask is built in a
        few whole-batch ops: query i of a row with prefix L sees keys j <= L + i (its prefix and a
        chain's causal part); a tree row's own block is then its ancestors; padded queries and
        rows that take no part see key 0 only (no all-blocked softmax row; discarded)."""
        entries = [e for _, e in items]
        B = len(entries)
        qs = [0 if e is None else 1 + e[1].n for e in entries]
        Q = max(qs)
        starts = [len(self.ids[s]) for s, _ in items]
        T = min(max(starts) + Q, self.capacity)
        tok, at = [[0] * Q for _ in range(B)], [[0 if e is None else L] * Q for L, e in zip(starts, entries)]
        for b, e in enumerate(entries):
            if e is not None:
                pending, draft = e
                L, q = starts[b], qs[b]
                tok[b][:q] = [pending, *draft.tokens.tolist()]
                at[b][:q] = range(L, L + q) if draft.is_chain else [L + d for d in (0, *draft.depths())]
        j = torch.arange(T)
        visible = j <= (torch.tensor(starts)[:, None] + torch.arange(Q))[..., None]  # [B, Q, T]
        visible &= (torch.arange(Q)[None, :] < torch.tensor(qs)[:, None])[..., None]
        visible[:, :, 0] = True
        for b, e in enumerate(entries):
            if e is not None and not e[1].is_chain:
                L, q = starts[b], qs[b]
                visible[b, :q, L : L + q] = tree_attention_mask(e[1], 0, self.dtype)[0, 0, :, : T - L] == 0
        mask = torch.zeros((B, 1, Q, T), dtype=self.dtype).masked_fill_(~visible[:, None], self._blocked)
        return torch.tensor(tok, dtype=torch.long), torch.tensor(at, dtype=torch.long), mask, starts

    @torch.inference_mode()
    def score(self, entries: list) -> list[torch.Tensor | None]:
        return self._logits(entries, self._run(entries, 0))

    def _logits(self, entries: list, h: torch.Tensor) -> list[torch.Tensor | None]:
        real = [(b, 1 + e[1].n) for b, e in enumerate(entries) if e is not None]
        rows = h[real[0][0], : real[0][1]] if len(real) == 1 else torch.cat([h[b, :q] for b, q in real])
        with packed_scope():
            logits = self.head(rows).float()
        if self.vocab:
            logits = logits[:, : self.vocab]
        out: list[torch.Tensor | None] = [None] * len(entries)
        at = 0
        for b, q in real:
            out[b] = logits[at : at + q]
            self._scored[b] = (entries[b][0], entries[b][1], h[b, :q])
            at += q
        return out

    @torch.inference_mode()
    def commit(self, s: int, path: tuple[int, ...]) -> None:
        scored = self._scored[s]
        if scored is None:
            raise RuntimeError("commit() without a preceding score()")
        pending, draft, h = scored
        L = len(self.ids[s])
        rows = [0] + [1 + i for i in path]
        self.cache.keep(s, L, rows)
        self._hidden[s, L : L + len(rows)] = h[rows]
        self.ids[s].append(pending)
        self.ids[s].extend(int(draft.tokens[i]) for i in path)
        self._scored[s] = None

    @torch.inference_mode()
    def move(self, src: int, dst: int) -> None:
        n = len(self.ids[src])
        self.cache.move(src, dst)
        self._hidden[dst, :n] = self._hidden[src, :n]
        self.ids[dst], self.ids[src] = self.ids[src], []
        self._scored[dst] = self._scored[src] = None

    def free(self, s: int) -> None:
        self.ids[s] = []
        self.cache.lengths[s] = 0
        self._scored[s] = None

    def nbytes(self) -> int:
        return self.cache.nbytes() + self._hidden.numel() * self._hidden.element_size()
