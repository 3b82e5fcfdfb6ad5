"""The batch's EAGLE: every EAGLE row's dynamic tree grown with ONE layer forward per tree level.

Why: solo, EAGLE feeds its layer once to catch up with the committed text and once per tree level
(up to ``depth`` - 1), over one to a few rows, where a forward is almost all per-op overhead; row by
row, a batch of R EAGLE rows pays R times that per step. Here each of those forwards runs once over
every EAGLE row (``lean_rows.ragged_layer``, the fused layer body the batch target runs), and the LM
head reads all rows' features at once.

Contract: ``BatchEagle(eagle, slots, capacity)`` (``eagle`` the engine's ``Eagle``: the shared
weights and settings) keeps the layer's keys/values for ``slots`` rows, ``[slots, heads, capacity +
MARGIN, head_dim]``, allocated at the first EAGLE row. ``new_state()`` is a row's ``EagleState``
(``state.py``); a state without a cache takes a slot the first time it drafts and keeps its cache on
the slot's views (``SlotKV``) until ``release(state)``, so the state's ``ids`` and ``kv.length``
stay the one record of what the slot holds. ``propose(states, contexts)`` returns one ``Draft`` per
state and is THE EAGLE proposal: the solo ``Eagle.propose(ctx)`` is
``propose([eagle.state], [ctx])`` (the solo state has a cache of its own and never takes a slot).
Per state: auto k's plain fallback (``state.fallback``), the budget, then
- one state left to draft: ``Eagle.tree``, the single-request computation on that state's cache
  (a batch of one, and the solo request, draft as fast as solo and with its floats);
- more: per row ``Eagle.tree``'s rule (the resync by longest common prefix, ``Growth`` for the
  tree, ``Eagle.cut`` for the cut), with ONE forward feeding every row's new pairs, then ONE
  forward per level over the growing rows' frontier nodes, each node seeing its row's committed
  slots, its ancestors and itself.
``catch_up_ms``: the last call's time feeding more than ``SHORT`` pairs to a row at once (a
newcomer's prompt, a run of plain steps): no draft-node cost, left out of the load policy's propose
cost as ``BatchDraft.catch_up_ms`` is.
Exactness: the draft is deterministic (q = None), so each row's output distribution is the target's
whatever its tree; batched kernels may round differently from solo and so, on a near-tie, change a
row's tree (never its greedy tokens): docs/batching.md.
"""

from __future__ import annotations

import time

import torch

from specdec.core.tree import Draft
from specdec.models.lean_rows import SHORT, Group, ragged_layer, slot_view
from specdec.proposers.eagle.growth import Growth
from specdec.proposers.eagle.state import EagleState

MARGIN = 64  # slots past the context for the tree's nodes (depth x beam of them at most)


class SlotKV:
    """``eagle.layer.KV``'s interface on one slot's views: a fixed capacity, never grown."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor) -> None:
        self.k, self.v, self.length = k, v, 0

    def ensure(self, n: int) -> None:
        if n > self.k.shape[1]:
            raise ValueError(f"eagle slot overflow: {n} positions, capacity {self.k.shape[1]}")


class BatchEagle:
    def __init__(self, eagle, slots: int, capacity: int) -> None:
        self.eagle, self.dec = eagle, eagle.decoders["fused"]
        self.shape = (slots, self.dec.heads, capacity + MARGIN, self.dec.hd)
        self.k = self.v = None
        self.free = list(range(slots - 1, -1, -1))
        self.catch_up_ms = 0.0

    def nbytes(self) -> int:
        return 0 if self.k is None else 2 * self.k.numel() * self.k.element_size()

    def new_state(self) -> EagleState:
        """A batch row's state: no cache until its first drafting step gives it a slot."""
        return EagleState()

    def _slot(self, state: EagleState) -> None:
        if state.kv is None:
            if self.k is None:
                self.k = torch.zeros(self.shape, dtype=self.dec.dtype, device=self.dec.device)
                self.v = torch.zeros_like(self.k)
            state.slot = s = self.free.pop()
            state.kv, state.ids = SlotKV(self.k[s], self.v[s]), []

    def release(self, state: EagleState) -> None:
        """The row of ``state`` ended: its slot is free (the state keeps its fallback's rates)."""
        if state.slot is not None:
            self.free.append(state.slot)
            state.kv, state.slot, state.ids = None, None, []

    @torch.inference_mode()
    def propose(self, states: list[EagleState], contexts: list) -> list[Draft]:
        self.catch_up_ms = 0.0
        drafts: list[Draft] = [Draft.empty()] * len(states)
        todo = []
        for i, (state, ctx) in enumerate(zip(states, contexts)):
            self._slot(state)
            if state.fallback.plain(ctx):
                continue  # the cache catches up by LCP at the next drafting step
            budget = min(self.eagle.nodes, ctx.budget, ctx.k_max or self.eagle.nodes)
            if budget > 0 and ctx.hidden is not None and len(ctx.hidden) > 0:
                todo.append((i, state, ctx, budget))
        if len(todo) == 1:  # the single-request computation, on the state's own cache or slot
            i, state, ctx, _ = todo[0]
            drafts[i] = self.eagle.tree(ctx, state)
        elif todo:
            for (i, _, _, budget), g in zip(todo, self._grow(todo)):
                drafts[i] = self.eagle.cut(g.tok, g.par, g.score, budget)
        for i, state, _, _ in todo:
            state.fallback.drafted(drafts[i].n)
        return drafts

    def _grow(self, todo: list) -> list[Growth]:
        t0 = time.perf_counter()
        roots, ms, long_ = self._sync([(state, ctx) for _, state, ctx, _ in todo])
        if long_:
            self.catch_up_ms = 1000 * (time.perf_counter() - t0)
        e = self.eagle
        growths = [Growth(roots[j], m) for j, m in enumerate(ms)]
        lp, idx = self._top(roots)
        for j, g in enumerate(growths):
            g.start(lp[j], idx[j])
        for d in range(1, e.depth):
            live = [j for j, g in enumerate(growths) if g.next(e.beam, e.floor)]
            if not live:
                break
            slots = [todo[j][1].slot for j in live]
            out, spans = self._level([growths[j] for j in live], slots, d)
            lp, idx = self._top(out)
            for j, (a, n) in zip(live, spans):
                growths[j].grown(out[a : a + n], lp[a : a + n], idx[a : a + n])
        return growths

    def _top(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.eagle.logp(feats).topk(self.eagle.top_k, dim=-1)

    def _sync(self, pairs: list) -> tuple[torch.Tensor, list[int], bool]:
        """Feed every row's pairs not yet cached in ONE forward: the roots [R, H], each row's m, and
        whether some row fed more than ``SHORT`` pairs (a catch-up)."""
        dev = self.dec.device
        starts, fs, es, slots = [], [], [], []
        for state, ctx in pairs:
            valid, f, e = self.eagle.pending(state, ctx.tokens, ctx.hidden)
            starts.append(valid)
            fs.append(f)
            es.append(e)
            slots.append(state.slot)
        lens = [f.shape[0] for f in fs]
        at = torch.cat([torch.arange(s, s + n, device=dev) for s, n in zip(starts, lens)])
        groups = _causal_groups(slots, starts, lens, dev)
        out = self._forward(torch.cat(fs), torch.cat(es), at, at, slots, lens, groups)
        ms = []
        for (state, ctx), s, n in zip(pairs, starts, lens):
            state.kv.length, state.ids = s + n, list(ctx.tokens)
            ms.append(s + n)
        last = torch.tensor(lens, device=dev).cumsum(0) - 1
        return out[last], ms, max(lens) > SHORT

    def _level(self, growths: list[Growth], slots: list[int], d: int):
        """ONE forward over the frontier nodes of the growing rows at depth ``d``: their predicted
        features [N, H] and each row's (first index, count) in them."""
        dev = self.dec.device
        fs, toks, pos, at, masks, spans = [], [], [], [], [], []
        n_seen = 0
        T = max(g.L + len(g.expand) for g in growths)
        for g in growths:
            f, t, p, own = g.inputs(d)
            n = len(t)
            fs.append(f)
            toks += t
            pos += [p] * n
            at += [g.L + i for i in range(n)]
            masks.append(g.mask(own, T, dev))
            spans.append((n_seen, n))
            n_seen += n
        Q = max(n for _, n in spans)
        mask = torch.zeros(len(growths), 1, Q, T, dtype=torch.bool, device=dev)
        for b, (g, m) in enumerate(zip(growths, masks)):
            mask[b, 0, : m.shape[0]] = m
            mask[b, 0, m.shape[0] :, : g.m] = True  # padded queries (discarded) see something
        g_row = torch.tensor([b for b, (_, n) in enumerate(spans) for _ in range(n)], device=dev)
        g_col = torch.tensor([i for _, n in spans for i in range(n)], device=dev)
        view = slot_view(slots, dev)
        group = Group(torch.arange(n_seen, device=dev), (g_row, g_col), (len(growths), Q), view, T, mask)
        e = self.eagle.embed[torch.tensor(toks, device=dev)]
        out = self._forward(torch.cat(fs), e, torch.tensor(pos, device=dev), torch.tensor(at, device=dev), slots,
                            [n for _, n in spans], [group])  # fmt: skip
        return out, spans  # the slots written, g.L .. g.L + n - 1, are counted by Growth.grown

    def _forward(self, f, e, pos, at, slots: list[int], lens: list[int], groups: list[Group]) -> torch.Tensor:
        """The layer over tokens flattened across rows: inputs fc(f | e), rotary at ``pos``, keys and
        values written at (slot, ``at``) per token."""
        dev = self.dec.device
        if int(at.max()) >= self.shape[2]:
            raise ValueError(f"eagle slot overflow: {int(at.max()) + 1} positions, capacity {self.shape[2]}")
        x = self.dec.fc(torch.cat([f, e], dim=-1))
        cos, sin = self.dec.rope(pos)
        slot_of = torch.tensor([s for s, n in zip(slots, lens) for _ in range(n)], device=dev)
        return ragged_layer(self.dec.body, x, cos, sin, (self.k, self.v), (slot_of, at), groups)


def _causal_groups(slots: list[int], starts: list[int], lens: list[int], dev) -> list[Group]:
    """Attention groups for rows appending ``lens`` tokens at ``starts`` (causal among themselves,
    seeing their slot's first ``start`` keys): short rows together, long ones (catch-ups) together,
    so a newcomer's many queries do not pad every other row (as ``LeanRows._groups``)."""
    first = [0]
    for n in lens:
        first.append(first[-1] + n)
    rows = range(len(lens))
    short = [b for b in rows if lens[b] <= SHORT]
    long_ = [b for b in rows if lens[b] > SHORT]
    out = []
    for bs in (short, long_) if short and long_ else (list(rows),):
        Q, T = max(lens[b] for b in bs), max(starts[b] + lens[b] for b in bs)
        tok = torch.cat([first[b] + torch.arange(lens[b], device=dev) for b in bs])
        g_row = torch.tensor([i for i, b in enumerate(bs) for _ in range(lens[b])], device=dev)
        g_col = torch.cat([torch.arange(lens[b], device=dev) for b in bs])
        st = torch.tensor([starts[b] for b in bs], device=dev)
        keys, qi = torch.arange(T, device=dev), torch.arange(Q, device=dev)
        mask = (keys[None, None, :] <= (st[:, None, None] + qi[None, :, None]))[:, None]
        out.append(Group(tok, (g_row, g_col), (len(bs), Q), slot_view([slots[b] for b in bs], dev), T, mask))
    return out
