"""Suffix decoding: a tree of continuations from a suffix cache shared by every request of an engine.

Contract. One ``SuffixDecoding`` proposer per engine holds one ``SuffixCache``
(``suffix_cache.py``), so every request the engine serves, solo or in a batch, drafts from the
prompts and outputs of the requests before it (SuffixDecoding, Oliaro et al., arXiv:2411.04975):
- Feeding: each request's tokens go into a document of its tenant's namespace (``ctx.tenant``;
  one namespace for all with ``shared=True``) as it runs: every call stores what was committed
  since the last one, except the last token (so the context never matches its own end); a finished
  request's remaining tokens are stored when its state sees tokens that do not extend its own (the
  next request, solo) or its row is released (batch). No commit hooks: the state follows the
  committed tokens, which only grow within a request.
- Drafting: the longest suffix of the context (``ngram_min`` to ``depth // 2`` tokens) with a
  continuation in the namespace; below it the most frequent continuations, best-first by path
  score (product of empirical probabilities), each child at least ``MIN_PROB`` of its siblings.
  Adaptive size: at most ``SIZE_PER_MATCH`` nodes per matched token (a longer match earns a bigger
  tree), at most ``min(ctx.k_max, ctx.budget)``; the depth follows (the trie's ``depth`` less the
  match). Where the cache has no match: the request's own prompt lookup (``find_continuation``
  over its tokens and ``ctx.corpus``) as a chain.
- Exactness: the draft is a deterministic function of the cache and the context, so its q is
  one-hot at each node's token (``Draft.q = None``), and the one verifier (``core/verify.py``)
  accepts a child x with probability r(x) / 1 (r: the node's p row, less the siblings it rejected
  before, renormalised) and moves a rejected child's mass to the next sibling; the output is
  distributed exactly as the target's p at every temperature, and at temperature 0 is
  plain greedy decoding (tests/test_suffix.py). The scores only order and prune the tree: they
  are never used as q.
``SuffixRows`` is the batch form (``core/methods.py``): a state per row, searched one by one.
``configure(cap_mb, shared)`` replaces the cache (``specdec serve --suffix-cache-mb``; 0 = off:
only the fallback drafts). ``kept`` is the cache, which the bench's cold start clears before every
timed generation (``specdec/bench/run.py``: a request must not draft from its own warm-up runs).
"""

from __future__ import annotations

import math

import torch

from specdec.core.proposer import Context
from specdec.core.seq import find_continuation
from specdec.core.tree import Draft
from specdec.proposers.lookup import Grown
from specdec.proposers.suffix_cache import SuffixCache

DEFAULT_CAP_MB = 64.0
DEPTH = 16  # the trie's depth: matches of up to DEPTH // 2 tokens, drafts of DEPTH - match levels
SIZE_PER_MATCH = 2  # nodes per matched token
MIN_PROB = 0.1  # a child below this share of its siblings is not drafted
FALLBACK_K = 8  # the longest chain of the prompt-lookup fallback


class SuffixState:
    """One request's link to the cache: its document, the token list fed so far, its namespace,
    and an int64 copy of its tokens for the fallback's search."""

    def __init__(self) -> None:
        self.doc: int | None = None
        self.ns: str | None = None
        self.of: list[int] | None = None  # the token list whose first ``fed`` tokens the document holds
        self.fed = 0
        self.grown = Grown()
        self.chose_plain = False
        self.source = ""  # "cache", "lookup" or "" (nothing drafted): where the last draft came from


class SuffixDecoding:
    name = "suffix"

    def __init__(self, cap_mb: float = DEFAULT_CAP_MB, shared: bool = False) -> None:
        self.cache = SuffixCache(cap_mb, DEPTH, shared)
        self.state = SuffixState()  # the solo request's; a batch row holds its own
        self.form = SuffixRows(self)

    def configure(self, cap_mb: float, shared: bool = False) -> None:
        """A fresh cache with this cap (0 = off) and namespace rule; every state starts again."""
        self.cache = SuffixCache(cap_mb, DEPTH, shared)
        self.state = SuffixState()

    @property
    def kept(self) -> SuffixCache:
        """What it keeps from earlier requests: the cache (the bench's ``cold`` clears it)."""
        return self.cache

    def new_state(self) -> SuffixState:
        return SuffixState()

    def propose(self, ctx: Context) -> Draft:
        """The solo request's draft (the batch of one, on the solo state)."""
        return self.draft(self.state, ctx)

    # -- feeding --------------------------------------------------------------------------------
    def sync(self, state: SuffixState, ctx: Context) -> None:
        """Store ``ctx.tokens`` but the last in ``state``'s document. Tokens that do not extend the
        last call's (another request: the engine gives each its own list) or another namespace
        first finish the old request (``finish``) and open a new document; a document evicted
        while its request runs is followed by a new one holding only what comes next."""
        cache, tokens = self.cache, ctx.tokens
        ns = cache.namespace(getattr(ctx, "tenant", None))
        same = (
            state.doc is not None
            and state.ns == ns
            and state.of is not None
            and (tokens is state.of or tokens[: len(state.of)] == state.of)
        )
        if not same:
            self.finish(state)
            state.doc, state.ns, state.fed = cache.open(ns), ns, 0
        elif not cache.alive(state.doc):  # evicted mid-request: go on from here, never re-feed the past
            state.doc = cache.open(ns)
        state.of = tokens
        upto = len(tokens) - 1
        if upto > state.fed:
            cache.extend(state.doc, tokens[state.fed : upto])
            state.fed = upto

    def finish(self, state: SuffixState) -> None:
        """The request of ``state`` ended: store the rest of its tokens and close its document."""
        if state.doc is not None and state.of is not None and self.cache.alive(state.doc):
            self.cache.extend(state.doc, state.of[state.fed :])
            self.cache.close(state.doc)
        state.doc, state.of, state.fed = None, None, 0

    # -- drafting -------------------------------------------------------------------------------
    def draft(self, state: SuffixState, ctx: Context) -> Draft:
        state.chose_plain, state.source = False, ""
        budget = min(ctx.k_max or ctx.budget, ctx.budget)
        self.sync(state, ctx)
        if budget <= 0:
            return Draft.empty()
        s, cache = ctx.spec, self.cache
        node, m = cache.match(state.ns, ctx.tokens, cache.depth // 2, s.ngram_min)
        if node is not None:
            size = min(budget, math.ceil(SIZE_PER_MATCH * m))
            tokens, parents, _ = cache.tree(node, size, MIN_PROB)
            if tokens:
                state.source = "cache"
                return Draft.from_parents(torch.tensor(tokens, dtype=torch.long), parents)
        cont = find_continuation(
            state.grown.view(ctx.tokens), s.ngram_max, s.ngram_min, min(budget, FALLBACK_K), ctx.corpus
        )
        if not cont:
            return Draft.empty()
        state.source = "lookup"
        return Draft.chain(torch.tensor(cont, dtype=torch.long))

    @property
    def chose_plain(self) -> bool:
        return False  # no auto k of its own: an empty draft is "nothing matched", not a choice


class SuffixRows:
    """The batch form: each row's state is searched on its own (``one_by_one``); a released row's
    request is finished (its last tokens stored)."""

    catch_up_ms = 0.0
    one_by_one = True

    def __init__(self, suffix: SuffixDecoding) -> None:
        self.suffix = suffix

    def new_state(self) -> SuffixState:
        return self.suffix.new_state()

    def propose(self, states: list[SuffixState], contexts: list) -> list[Draft]:
        return [self.suffix.draft(state, ctx) for state, ctx in zip(states, contexts)]

    def release(self, state: SuffixState) -> None:
        self.suffix.finish(state)

    def nbytes(self) -> int:
        return 0  # no per-slot buffers; the cache is bounded by its own cap (``cache.stats()``)
