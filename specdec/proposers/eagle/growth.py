"""One EAGLE-2 dynamic tree while it grows: the bookkeeping between the layer's forwards.

Why a module of its own: the single-request proposer (``proposer.py``) grows one tree with one
layer forward per level; the batch (``specdec/proposers/eagle/batch.py``) grows every EAGLE row's tree with ONE
forward per level over all rows. Both run the same per-row rule through this class, so a row's tree
is its solo tree whatever shares the batch (up to the float rounding of batched kernels).

Contract: ``Growth(root, m)``: ``root`` is the predicted feature after the committed text, whose
LM-head log-probabilities start the tree (``start(logp, index)``, the ``top_k`` best); ``m`` the
committed pairs in the layer's cache, so the first tree node goes to cache slot ``m``.
Per level d = 1, 2, ...: ``next(beam, floor)`` picks the ``beam`` most valuable frontier nodes to feed
(empty: stop, the best value is below ``floor``); ``inputs(d)`` gives their parent features [n, H],
their tokens, their rotary position (m - 1 + d, one for all) and, per node, the cache slots it may see
besides the committed ones (its fed ancestors and itself); after the forward, ``grown(out, logp,
index)`` records their predicted features and adds their children. ``tok``, ``par`` (parent index,
-1 = root) and ``score`` (log value: the draft's log-probabilities summed along the path) are the
candidates as flat lists, in creation order, for ``Eagle.cut``.
"""

from __future__ import annotations

import math

import torch


class Growth:
    def __init__(self, root: torch.Tensor, m: int) -> None:
        self.root, self.m, self.L = root, m, m  # L: the next free cache slot
        self.tok: list[int] = []
        self.par: list[int] = []
        self.score: list[float] = []
        self.slots: dict[int, list[int]] = {}  # fed candidate -> slots of its fed ancestors and itself
        self.feats: dict[int, torch.Tensor] = {}  # fed candidate -> its predicted feature
        self.frontier: list[int] = []
        self.expand: list[int] = []

    def start(self, logp: torch.Tensor, index: torch.Tensor) -> None:
        self.frontier = self._add(index.tolist(), logp.tolist(), -1, 0.0)

    def next(self, beam: int, floor: float) -> list[int]:
        """The nodes to feed at the next level, best first; [] when the best is worth less than ``floor``."""
        self.frontier.sort(key=lambda c: -self.score[c])
        expand = self.frontier[:beam]
        if not expand or math.exp(self.score[expand[0]]) < floor:
            expand = []
        self.expand = expand
        return expand

    def inputs(self, d: int) -> tuple[torch.Tensor, list[int], int, list[list[int]]]:
        f_in, own_slots = [], []
        for i, c in enumerate(self.expand):
            p = self.par[c]
            own = self.slots.get(p, []) + [self.L + i]
            self.slots[c] = own
            own_slots.append(own)
            f_in.append(self.feats[p] if p >= 0 else self.root)
        return torch.stack(f_in), [self.tok[c] for c in self.expand], self.m - 1 + d, own_slots

    def mask(self, own_slots: list[list[int]], width: int, device) -> torch.Tensor:
        """[n, width] bool (True = visible): each fed node sees the committed slots, its ancestors, itself."""
        mask = torch.zeros(len(own_slots), width, dtype=torch.bool, device=device)
        mask[:, : self.m] = True
        for i, own in enumerate(own_slots):
            mask[i, own] = True
        return mask

    def grown(self, out: torch.Tensor, logp: torch.Tensor, index: torch.Tensor) -> None:
        """``out`` [n, H] the fed nodes' predicted features; ``logp``/``index`` [n, top_k] their children."""
        self.L += len(self.expand)
        frontier: list[int] = []
        for i, c in enumerate(self.expand):
            self.feats[c] = out[i]
            frontier += self._add(index[i].tolist(), logp[i].tolist(), c, self.score[c])
        self.frontier = frontier

    def _add(self, tokens: list[int], logps: list[float], parent: int, base: float) -> list[int]:
        start = len(self.tok)
        self.tok.extend(tokens)
        self.par.extend([parent] * len(tokens))
        self.score.extend(base + lp for lp in logps)
        return list(range(start, len(self.tok)))
