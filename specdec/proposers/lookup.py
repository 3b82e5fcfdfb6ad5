"""Prompt lookup decoding: draft tokens copied from an n-gram match in the context, no model.

Contract: ``seq.find_continuation`` with this request's bounds (``ctx.spec.ngram_max`` down to
``ngram_min``): the most recent earlier occurrence of the last n committed tokens (prompt plus
generated text), then the extra sequences in ``ctx.corpus`` (an editor's other documents), and up
to ``min(ctx.k_max, ctx.budget)`` of the tokens that followed. The draft is deterministic (q =
None: one-hot at the proposed tokens), so the verifier's sibling-wise rule accepts a token with
probability p(x) and stays exact. No match gives an empty draft, i.e. a plain decoding step.

With ``k = "auto"`` (``ctx.k_max`` is then the registry's cap, 8) the draft is the first k of
those tokens, k in [0, cap] chosen each step from measured per-position acceptance and measured
step costs (``lookup_k.py``); k = 0 is a plain step auto k chose (``chose_plain``, which the
engine counts in ``Stats.auto_plain``). An explicit k drafts the whole match up to k, as always.
``skip(tokens)`` tells auto k that a step of the request ran without a call (a batch row whose
load policy capped k at 0). The measurements live on this object, so one proposer per engine
carries them across requests; a batch row gets its own copy (``specdec/serving/batch/rows.py``).

The search runs on an int64 copy of the request's tokens that grows by what was appended since
the last call (``Grown``), not on a fresh conversion of the whole list every step: a step's lookup
is pure overhead when nothing matches, so it must stay small against a plain step.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from specdec.core.proposer import Context
from specdec.core.seq import find_continuation
from specdec.core.tree import Draft
from specdec.proposers.lookup_k import LookupAuto


class Grown:
    """``view(tokens)``: ``tokens`` as an int64 array, copying only what was appended since the last
    call with the same list (a request's token list only grows); anything else is copied afresh."""

    def __init__(self) -> None:
        self.of: list[int] | None = None
        self.arr = np.empty(0, dtype=np.int64)
        self.n = 0

    def view(self, tokens: list[int]) -> np.ndarray:
        n, have = len(tokens), self.n
        if tokens is not self.of or n < have or (have and self.arr[have - 1] != tokens[have - 1]):
            self.of, have = tokens, 0
        if n > len(self.arr):
            grown = np.empty(max(2 * n, 256), dtype=np.int64)
            grown[:have] = self.arr[:have]
            self.arr = grown
        if n > have:
            self.arr[have:n] = tokens[have:n]
        self.n = n
        return self.arr[:n]


class PromptLookup:
    name = "lookup"

    def __init__(self) -> None:
        self.auto = LookupAuto()
        self.chose_plain = False
        self.grown = Grown()

    def propose(self, ctx: Context) -> Draft:
        self.chose_plain = False
        budget = min(ctx.k_max or ctx.budget, ctx.budget)
        if budget <= 0:
            return Draft.empty()
        s = ctx.spec
        cont = find_continuation(self.grown.view(ctx.tokens), s.ngram_max, s.ngram_min, budget, ctx.corpus)
        if s.k == "auto":
            cont = cont[: self.auto.choose(ctx, cont)]
            self.auto.drafted(len(cont))
            self.chose_plain = self.auto.chose_plain
        if not cont:
            return Draft.empty()
        return Draft.chain(torch.tensor(cont, dtype=torch.long))

    def skip(self, tokens: list[int]) -> None:
        self.auto.skip()

    def fork(self) -> PromptLookup:
        """A batch row's proposer: auto k's measurements so far, no request yet, its own index."""
        f = copy.copy(self)
        f.auto, f.chose_plain, f.grown = self.auto.fork(), False, type(self.grown)()
        return f
