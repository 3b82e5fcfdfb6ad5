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
``skip()`` tells auto k that a step of the request ran without a call (a batch row whose load
policy capped k at 0). The measurements live in a ``LookupState``: the proposer holds the solo
request's (``state``), so one proposer per engine carries them across requests, and a batch row
gets its own, a copy of the measurements so far (``new_state``). ``propose(ctx)`` is the batch of
one: the batch form (``LookupRows.propose(states, contexts)``) drafts each state with
``draft(state, ctx)``, which the solo ``propose`` calls on its state directly.

The search runs on an int64 copy of the request's tokens that grows by what was appended since
the last call (``Grown``), not on a fresh conversion of the whole list every step: a step's lookup
is pure overhead when nothing matches, so it must stay small against a plain step.
"""

from __future__ import annotations

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


class LookupState:
    """One request's lookup state: auto k's measurements (``LookupAuto``), the int64 copy of its
    tokens (``Grown``) and whether its last step was a plain one auto k chose."""

    def __init__(self, auto: LookupAuto | None = None) -> None:
        self.auto = auto if auto is not None else LookupAuto()
        self.grown = Grown()
        self.chose_plain = False

    def skip(self) -> None:
        """A step of the request ran without a call (a batch row capped at 0)."""
        self.auto.skip()


class PromptLookup:
    name = "lookup"

    def __init__(self) -> None:
        self.state = LookupState()  # the solo request's; a batch row holds its own (new_state)
        self.form = LookupRows(self)

    @property
    def auto(self) -> LookupAuto:
        return self.state.auto

    @property
    def chose_plain(self) -> bool:
        return self.state.chose_plain

    def new_state(self) -> LookupState:
        """A batch row's state: auto k's measurements so far (a copy), no request yet, its own index."""
        return LookupState(self.state.auto.carried())

    def propose(self, ctx: Context) -> Draft:
        """The solo request's draft: the batch of one (``LookupRows.propose`` is ``draft`` per state;
        called directly here, a step's lookup being pure overhead when nothing matches)."""
        return self.draft(self.state, ctx)

    def draft(self, state: LookupState, ctx: Context) -> Draft:
        """One request's draft from its state (the string search and auto k)."""
        state.chose_plain = False
        budget = min(ctx.k_max or ctx.budget, ctx.budget)
        if budget <= 0:
            return Draft.empty()
        s = ctx.spec
        cont = find_continuation(state.grown.view(ctx.tokens), s.ngram_max, s.ngram_min, budget, ctx.corpus)
        if s.k == "auto":
            cont = cont[: state.auto.choose(ctx, cont)]
            state.auto.drafted(len(cont))
            state.chose_plain = state.auto.chose_plain
        if not cont:
            return Draft.empty()
        return Draft.chain(torch.tensor(cont, dtype=torch.long))


class LookupRows:
    """Lookup's batch form (``core/methods.py``): no model to share, so each row's state is
    searched on its own (``one_by_one``: the batch proposes and times each row apart)."""

    catch_up_ms = 0.0
    one_by_one = True

    def __init__(self, lookup: PromptLookup) -> None:
        self.lookup = lookup

    def new_state(self) -> LookupState:
        return self.lookup.new_state()

    def propose(self, states: list[LookupState], contexts: list) -> list[Draft]:
        return [self.lookup.draft(state, ctx) for state, ctx in zip(states, contexts)]

    def release(self, state: LookupState) -> None:
        pass

    def nbytes(self) -> int:
        return 0
