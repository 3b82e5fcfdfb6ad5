"""Prompt lookup: the longest suffix n-gram's most recent earlier match, up to the budget."""
from __future__ import annotations

from engine.config import SamplingParams
from engine.proposers.base import Context
from engine.proposers.lookup import PromptLookup, find_continuation


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
    prop = PromptLookup(k=4)
    d = prop.propose(Context([1, 2, 3, 4, 1, 2], SamplingParams(), budget=3))
    assert d.tokens.tolist() == [3, 4, 1] and d.q is None and d.is_chain
    assert prop.propose(Context([1, 2, 3], SamplingParams(), budget=3)).n == 0
    assert prop.propose(Context([1, 2, 1], SamplingParams(), budget=0)).n == 0
