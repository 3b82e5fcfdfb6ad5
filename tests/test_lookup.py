"""Prompt lookup: the longest suffix n-gram's most recent earlier match, up to the budget."""

from __future__ import annotations

import numpy as np

from specdec.core.config import GenerateSpec
from specdec.core.proposer import Context
from specdec.core.seq import find_continuation, follow
from specdec.proposers.lookup import PromptLookup


def test_longest_ngram_wins_and_the_most_recent_match_is_used():
    seq = [1, 2, 3, 9, 9, 2, 3, 7, 8, 5, 1, 2, 3]
    # the 3-gram (1, 2, 3) occurs at 0 -> continuation 9, 9, 2
    assert find_continuation(seq, 3, 1, 3) == [9, 9, 2]
    # with n <= 2 the most recent (2, 3) is at 5 -> 7, 8
    assert find_continuation(seq, 2, 1, 2) == [7, 8]


def test_no_match_and_budget():
    assert find_continuation([1, 2, 3, 4], 3, 1, 5) == []
    assert find_continuation([5, 6, 5], 2, 1, 1) == [6]
    assert find_continuation([7], 3, 1, 4) == []
    assert find_continuation([4, 4, 4, 4], 3, 2, 10) == [4]


def test_proposer_returns_a_deterministic_chain():
    prop, spec = PromptLookup(), GenerateSpec(method="lookup", k=4)
    d = prop.propose(Context([1, 2, 3, 4, 1, 2], spec, budget=3, k_max=4))
    assert d.tokens.tolist() == [3, 4, 1] and d.q is None and d.is_chain
    assert prop.propose(Context([1, 2, 3, 4, 1, 2], spec, budget=8, k_max=2)).tokens.tolist() == [
        3,
        4,
    ]  # the request's k
    assert prop.propose(Context([1, 2, 3], spec, budget=3, k_max=4)).n == 0
    assert prop.propose(Context([1, 2, 1], spec, budget=0, k_max=4)).n == 0


def test_follow_finds_the_last_occurrence_with_a_follower():
    hay = np.array([1, 2, 3, 9, 1, 2, 3, 7, 8, 1, 2])
    assert follow(hay, np.array([1, 2, 3]), 5) == [7, 8, 1, 2]
    assert follow(hay, np.array([1, 2]), 1) == [3]  # the final "1 2" has no follower
    assert follow(hay, np.array([4, 5]), 3) == []
    assert follow(np.array([1]), np.array([1]), 3) == []


def test_the_context_comes_first_then_the_corpus_in_order():
    """What the language server relies on: a request's corpus (its other documents) extends lookup."""
    spec = GenerateSpec(method="lookup", ngram_max=3, ngram_min=2)

    def draft(tokens, corpus):
        d = PromptLookup().propose(Context(tokens, spec, budget=3, k_max=4, corpus=tuple(corpus)))
        return d.tokens.tolist(), d.q

    assert draft([5, 6, 7, 1, 5, 6], [np.array([5, 6, 9, 9])]) == ([7, 1, 5], None)  # own context first
    assert draft([1, 2, 5, 6], [np.array([5, 6, 8]), np.array([5, 6, 9])]) == ([8], None)
    assert draft([1, 2, 3, 4], [np.array([7, 3, 4, 8, 8])]) == ([8, 8], None)
    assert draft([1, 2, 3, 4], [np.array([9, 9])])[0] == []


def test_a_corpus_of_plain_lists_works_like_arrays():
    assert find_continuation([5, 6, 7, 1, 2], 2, 2, 4, corpus=[[9, 1, 2, 3, 4]]) == [3, 4]
    assert find_continuation([5, 6, 7, 1, 2], 2, 2, 4, corpus=[np.array([9, 1, 2, 3, 4])]) == [3, 4]


def test_the_search_array_grows_with_the_request_and_follows_any_other_list():
    from specdec.proposers.lookup import Grown

    g, tokens = Grown(), [1, 2, 3]
    assert g.view(tokens).tolist() == [1, 2, 3]
    first = g.arr
    tokens.extend(range(4, 300))  # appended: copied into a larger buffer, the old part kept
    assert g.view(tokens).tolist() == tokens and g.arr is not first
    tokens.append(7)
    buf = g.arr
    assert g.view(tokens).tolist() == tokens and g.arr is buf  # room left: the same buffer
    assert g.view([9, 8]).tolist() == [9, 8]  # another list
    other = [9, 8]
    g.view(other)
    other[1] = 5  # changed in place (never done by the engine): noticed at the last cached token
    assert g.view(other).tolist() == [9, 5]
    del other[1:]
    assert g.view(other).tolist() == [9]
