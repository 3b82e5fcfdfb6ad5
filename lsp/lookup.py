"""Prompt lookup over the editor's documents: the lookup proposer, with more text to copy from.

Contract: ``DocumentLookup(k, ngram_max, ngram_min, corpus)`` is a proposer (``propose(ctx) ->
Draft``). For n from ``ngram_max`` down to ``ngram_min`` it looks for the last n committed tokens
first in the committed tokens themselves (the engine's own prompt lookup rule), then in each
token sequence of ``corpus`` in order (the current document outside the model's window, then the
other open documents), and drafts up to ``k`` tokens that followed the first match. The draft is
deterministic (q = None), so the verifier stays exact: the output is the target's, only faster
when the copied tokens are right.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from engine.proposers.base import Context
from engine.proposers.lookup import find_continuation
from engine.tree import Draft


def follow(haystack: np.ndarray, pattern: np.ndarray, budget: int) -> list[int]:
    """Tokens after the last occurrence of ``pattern`` in ``haystack`` that has a follower."""
    n, L = len(pattern), len(haystack)
    if n == 0 or L <= n:
        return []
    hit = haystack[: L - n] == pattern[0]
    for j in range(1, n):
        hit &= haystack[j: L - n + j] == pattern[j]
    where = np.flatnonzero(hit)
    if len(where) == 0:
        return []
    s = int(where[-1]) + n
    return haystack[s: s + budget].tolist()


class DocumentLookup:
    name = "lookup"

    def __init__(self, k: int, ngram_max: int, ngram_min: int, corpus: Sequence[np.ndarray] = ()) -> None:
        self.k, self.ngram_max, self.ngram_min = k, ngram_max, ngram_min
        self.corpus = [np.asarray(c, dtype=np.int64) for c in corpus if len(c)]

    def propose(self, ctx: Context) -> Draft:
        budget = min(self.k, ctx.budget)
        if budget <= 0:
            return Draft.empty()
        tokens = np.asarray(ctx.tokens, dtype=np.int64)
        for n in range(min(self.ngram_max, len(tokens)), self.ngram_min - 1, -1):
            cont = find_continuation(tokens, n, n, budget)
            for hay in self.corpus:
                if cont:
                    break
                cont = follow(hay, tokens[len(tokens) - n:], budget)
            if cont:
                return Draft.chain(torch.tensor(cont, dtype=torch.long))
        return Draft.empty()
