"""Prompt lookup decoding: draft tokens copied from an n-gram match in the context, no model.

Contract: for n from ``ngram_max`` down to ``ngram_min``, find the most recent earlier occurrence
of the last n committed tokens (prompt plus generated text) and propose up to ``budget`` tokens
that followed it. The draft is deterministic (q = None: one-hot at the proposed tokens), so the
verifier's sibling-wise rule accepts a token with probability p(x) and stays exact. No match gives
an empty draft, i.e. a plain decoding step.
"""
from __future__ import annotations

import numpy as np
import torch

from ..tree import Draft
from .base import Context


def find_continuation(tokens: list[int] | np.ndarray, ngram_max: int, ngram_min: int, budget: int) -> list[int]:
    """Tokens following the most recent earlier match of the longest matching suffix n-gram."""
    seq = np.asarray(tokens, dtype=np.int64)
    L = len(seq)
    for n in range(min(ngram_max, L - 1), ngram_min - 1, -1):
        suffix = seq[L - n:]
        hits = np.flatnonzero(seq[: L - n] == suffix[0])  # s < L - n, so a token follows
        for s in hits[::-1]:
            if np.array_equal(seq[s:s + n], suffix):
                return seq[s + n: s + n + budget].tolist()
    return []


class PromptLookup:
    name = "lookup"

    def __init__(self, k: int = 8, ngram_max: int = 3, ngram_min: int = 2) -> None:
        self.k, self.ngram_max, self.ngram_min = k, ngram_max, ngram_min

    def propose(self, ctx: Context) -> Draft:
        budget = min(self.k, ctx.budget)
        if budget <= 0:
            return Draft.empty()
        cont = find_continuation(ctx.tokens, self.ngram_max, self.ngram_min, budget)
        if not cont:
            return Draft.empty()
        return Draft.chain(torch.tensor(cont, dtype=torch.long))
