"""Prompt lookup decoding: draft tokens copied from an n-gram match in the context, no model.

Contract: ``seq.find_continuation`` with this request's bounds (``ctx.spec.ngram_max`` down to
``ngram_min``): the most recent earlier occurrence of the last n committed tokens (prompt plus
generated text), then the extra sequences in ``ctx.corpus`` (an editor's other documents), and up
to ``min(ctx.k_max, ctx.budget)`` of the tokens that followed. The draft is deterministic (q =
None: one-hot at the proposed tokens), so the verifier's sibling-wise rule accepts a token with
probability p(x) and stays exact. No match gives an empty draft, i.e. a plain decoding step.
"""

from __future__ import annotations

import torch

from ..seq import find_continuation
from ..tree import Draft
from .base import Context


class PromptLookup:
    name = "lookup"

    def propose(self, ctx: Context) -> Draft:
        budget = min(ctx.k_max or ctx.budget, ctx.budget)
        if budget <= 0:
            return Draft.empty()
        s = ctx.spec
        cont = find_continuation(ctx.tokens, s.ngram_max, s.ngram_min, budget, ctx.corpus)
        if not cont:
            return Draft.empty()
        return Draft.chain(torch.tensor(cont, dtype=torch.long))
