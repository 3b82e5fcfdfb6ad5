"""Token-sequence primitives shared by the engine and its front ends: prefixes and n-gram matches.

Contract (pure functions of integer sequences, no model):
- ``common_prefix(a, b)``: the length of the longest common prefix. Every stateful part of the
  engine (the target's cache, the draft model's cache, EAGLE's cache) keeps its state as a prefix
  of the committed tokens and resynchronises with this on each call, so nobody needs commit or
  rollback hooks.
- ``resync(cached_ids, cache_len, tokens, keep_last)``: how many cached positions are still valid
  for ``tokens``. A cache whose length disagrees with the ids it recorded was interrupted mid-call
  (a stream closed during a step): nothing of it is trusted and it starts clean.
- ``follow_at(haystack, pattern, earliest=False)``: the index just after the most recent (or the
  earliest) occurrence of ``pattern`` in ``haystack`` that has a follower, or None;
  ``follow(haystack, pattern, budget, earliest=False)``: up to ``budget`` tokens from there.
- ``find_continuation(tokens, ngram_max, ngram_min, budget, corpus=(), earliest=False)``: prompt
  lookup's rule. For n from ``ngram_max`` down to ``ngram_min``, the last n tokens are looked up
  first in ``tokens`` itself, then in each sequence of ``corpus`` in order (an editor's other
  documents, say); the first hit's followers are the draft. The longest n wins, so a longer, more
  specific match in another document beats a shorter one here. The engine takes the most recent
  match; ``earliest=True`` is the rule of Saxena's prompt lookup, transformers and vLLM
  (docs/theory-lookup.md compares the two).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def resync(cached_ids: Sequence[int], cache_len: int, tokens: Sequence[int], limit: int) -> int:
    """Cached positions to keep: the common prefix of ``cached_ids`` and ``tokens``, at most
    ``limit``; 0 when the cache holds a different number of positions than ids were recorded."""
    if cache_len != len(cached_ids):  # interrupted mid-call: start clean
        return 0
    return max(0, min(common_prefix(cached_ids, tokens), limit))


def follow_at(haystack: np.ndarray, pattern: np.ndarray, earliest: bool = False) -> int | None:
    n, L = len(pattern), len(haystack)
    if n == 0 or L <= n:
        return None
    hit = haystack[: L - n] == pattern[0]
    for j in range(1, n):
        hit &= haystack[j : L - n + j] == pattern[j]
    where = np.flatnonzero(hit)
    if len(where) == 0:
        return None
    return int(where[0 if earliest else -1]) + n


def follow(haystack: np.ndarray, pattern: np.ndarray, budget: int, earliest: bool = False) -> list[int]:
    """Tokens after the most recent (or earliest) occurrence of ``pattern`` that has a follower."""
    s = follow_at(haystack, pattern, earliest) if budget > 0 else None
    return [] if s is None else haystack[s : s + budget].tolist()


def find_continuation(
    tokens: Sequence[int] | np.ndarray,
    ngram_max: int,
    ngram_min: int,
    budget: int,
    corpus: Sequence[np.ndarray] = (),
    earliest: bool = False,
) -> list[int]:
    seq = np.asarray(tokens, dtype=np.int64)
    L = len(seq)
    for n in range(min(ngram_max, L), ngram_min - 1, -1):  # n = L: only another sequence can match
        suffix = seq[L - n :]
        cont = follow(seq, suffix, budget, earliest)
        for hay in corpus:
            if cont:
                break
            cont = follow(np.asarray(hay, dtype=np.int64), suffix, budget, earliest)
        if cont:
            return cont
    return []


def match_start(tokens: Sequence[int], ngram_max: int, ngram_min: int, earliest: bool = False) -> int | None:
    """Where ``find_continuation`` (no corpus) would start copying in ``tokens``, or None."""
    seq = np.asarray(tokens, dtype=np.int64)
    for n in range(min(ngram_max, len(seq)), ngram_min - 1, -1):
        s = follow_at(seq, seq[len(seq) - n :], earliest)
        if s is not None:
            return s
    return None
