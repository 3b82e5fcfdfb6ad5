"""The shared suffix cache's pure logic: insertion, longest-suffix match, frequency-scored trees,
eviction at the memory cap, tenant isolation; and the proposer's feeding and fallback (no model)."""

from __future__ import annotations

import random

import pytest

from specdec.core.config import GenerateSpec
from specdec.core.proposer import Context
from specdec.proposers.suffix import SuffixDecoding
from specdec.proposers.suffix_cache import NODE_BYTES, TOKEN_BYTES, SuffixCache


def _cache(docs, depth=8, cap_mb=16.0, ns="a"):
    c = SuffixCache(cap_mb, depth)
    for d in docs:
        doc = c.open(ns)
        c.extend(doc, d)
        c.close(doc)
    return c


def _count_nodes(node) -> int:
    return sum(1 + _count_nodes(k) for k in (node.kids or {}).values())


def _substrings(docs, depth):
    """Every substring of length <= depth with its occurrence count: what the trie must hold."""
    out: dict[tuple, int] = {}
    for d in docs:
        for i in range(len(d)):
            for j in range(i + 1, min(len(d), i + depth) + 1):
                out[tuple(d[i:j])] = out.get(tuple(d[i:j]), 0) + 1
    return out


def test_insertion_holds_every_bounded_substring_with_its_count():
    rng = random.Random(0)
    docs = [[rng.randrange(5) for _ in range(rng.randrange(1, 30))] for _ in range(6)]
    c = SuffixCache(16.0, depth=5)
    for d in docs:  # fed in uneven pieces, as a request's steps feed it
        doc, i = c.open("a"), 0
        while i < len(d):
            step = rng.randrange(1, 4)
            c.extend(doc, d[i : i + step])
            i += step
    want = _substrings(docs, 5)
    for sub, n in want.items():
        assert c.walk("a", sub).count == n, sub
    assert c.nodes == len(want) == _count_nodes(c.roots["a"])
    assert c.walk("a", [9]) is None and c.walk("b", [0]) is None
    assert c.tokens == sum(map(len, docs)) and c.nbytes() == c.nodes * NODE_BYTES + c.tokens * TOKEN_BYTES


def test_the_longest_suffix_with_a_continuation_is_matched():
    c = _cache([[1, 2, 3, 4, 5], [9, 3, 4, 7], [2, 3, 4]])
    node, m = c.match("a", [8, 1, 2, 3, 4], max_len=7)
    assert m == 4 and sorted(node.kids) == [5]  # "1 2 3 4" -> 5
    node, m = c.match("a", [8, 0, 2, 3, 4], max_len=7)
    assert m == 3 and sorted(node.kids) == [5]  # "2 3 4" occurs twice, once with a follower
    node, m = c.match("a", [6, 6, 3, 4], max_len=7)
    assert m == 2 and sorted(node.kids) == [5, 7]
    assert c.match("a", [6, 6, 3, 4], max_len=7, min_len=3) == (None, 0)
    node, m = c.match("a", [1, 2, 3, 4], max_len=2)
    assert m == 2  # the bound on the match's length
    assert c.match("a", [7, 7], max_len=7) == (None, 0)
    assert c.match("a", [5], max_len=7) == (None, 0)  # "5" only ends a document: no continuation
    assert c.match("other", [3, 4], max_len=7) == (None, 0)


def test_the_tree_is_best_first_by_frequency_and_pruned():
    # after "1 2": 3 three times (then 4 twice, 5 once), 6 once, 7 never enough
    docs = [[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 6, 8]]
    c = _cache(docs)
    node, m = c.match("a", [0, 1, 2], max_len=7)
    assert m == 2
    tokens, parents, scores = c.tree(node, max_nodes=10, min_prob=0.1)
    assert tokens == [3, 4, 6, 5, 8]
    assert parents == [-1, 0, -1, 0, 2]  # siblings in descending score; parents before children
    assert scores == pytest.approx([0.75, 0.5, 0.25, 0.25, 0.25])
    assert c.tree(node, max_nodes=2)[0] == [3, 4]  # the size cap keeps the best nodes
    assert c.tree(node, max_nodes=10, min_prob=0.3)[0] == [3, 4, 5]  # 6 (1 in 4) is pruned, 5 (1 in 3) kept
    assert c.tree(node, max_nodes=10, min_prob=0.5)[0] == [3, 4]


def test_eviction_at_the_cap_removes_whole_least_recently_used_documents():
    rng = random.Random(1)
    docs = [[rng.randrange(1000) for _ in range(50)] for _ in range(8)]
    per_doc = _cache(docs[:1]).nbytes()
    cap_mb = 3.5 * per_doc / 2**20  # room for three of these documents, not four
    c = SuffixCache(cap_mb, depth=8)
    ids = []
    for d in docs:
        ids.append(c.open("a"))
        c.extend(ids[-1], d)
        assert c.nbytes() <= c.cap
    assert [c.alive(i) for i in ids] == [False] * 5 + [True] * 3 and c.evicted == 5
    # what is left is exactly the trie of the three newest documents
    fresh = _cache(docs[5:])
    assert c.nodes == fresh.nodes == _count_nodes(c.roots["a"]) and c.tokens == fresh.tokens
    assert c.walk("a", docs[0][:3]) is None and c.walk("a", docs[7][:3]).count == 1
    # using a document makes it the most recent: the next eviction takes another
    c.extend(ids[5], [1])
    ids.append(c.open("a"))
    c.extend(ids[-1], docs[0])
    assert c.alive(ids[5]) and not c.alive(ids[6])
    # a document larger than the cap empties the cache instead of exceeding it
    big = c.open("a")
    c.extend(big, [rng.randrange(1000) for _ in range(400)])
    assert not c.alive(big) and c.nodes == 0 and c.nbytes() == 0 and c.roots == {}


def test_a_cap_of_zero_stores_nothing():
    c = SuffixCache(0.0)
    doc = c.open("a")
    assert c.extend(doc, [1, 2, 3]) is False and c.nodes == 0
    with pytest.raises(ValueError):
        SuffixCache(-1.0)


def test_tenants_are_isolated_unless_shared():
    c = SuffixCache(16.0, depth=8)
    a, b = c.namespace("alice"), c.namespace("bob")
    assert a != b and c.namespace(None) not in (a, b)
    doc = c.open(a)
    c.extend(doc, [1, 2, 3, 4, 5])
    assert c.match(a, [1, 2, 3], max_len=7)[1] == 3
    assert c.match(b, [1, 2, 3], max_len=7) == (None, 0)
    shared = SuffixCache(16.0, depth=8, shared=True)
    assert shared.namespace("alice") == shared.namespace("bob") == shared.namespace(None)


def _ctx(tokens, tenant=None, k_max=8, budget=16, spec=None):
    return Context(tokens, spec or GenerateSpec(method="suffix"), budget, k_max, tenant=tenant)


def test_the_proposer_drafts_a_deterministic_tree_from_an_earlier_request():
    s = SuffixDecoding()
    first = [5, 1, 2, 3, 4, 9, 9, 1, 2, 3, 7]
    for n in range(2, len(first) + 1):  # one request's steps, its token list growing
        s.propose(_ctx(first[:n]))
    d = s.propose(_ctx([8, 8, 1, 2, 3]))  # another request: the first's text is in the cache now
    assert d.q is None and s.state.source == "cache"  # deterministic: q one-hot at each node
    # "1 2 3" was followed once by 4 (then 9 9 1 2 ...) and once by 7: 6 nodes for a 3-token match
    assert d.tokens.tolist() == [4, 7, 9, 9, 1, 2] and d.parents == (-1, -1, 0, 2, 3, 4)
    assert s.propose(_ctx([8, 8, 1, 2, 3])).tokens.tolist() == d.tokens.tolist()  # same cache, same tree
    # adaptive size: 2 nodes per matched token, and never over k or the budget
    assert s.propose(_ctx([6, 6, 6, 2, 3], budget=16)).n <= 4
    assert s.propose(_ctx([8, 8, 1, 2, 3], k_max=1)).n == 1
    assert s.propose(_ctx([8, 8, 1, 2, 3], budget=0)).n == 0


def test_the_proposer_falls_back_to_its_own_prompt_lookup_and_keeps_tenants_apart():
    s = SuffixDecoding()
    for n in range(2, 9):
        s.propose(_ctx([1, 2, 3, 4, 5, 6, 7, 8][:n], tenant="alice"))
    s.propose(_ctx([0], tenant="alice"))  # the next request finishes alice's document
    d = s.propose(_ctx([9, 9, 2, 3, 4], tenant="bob"))
    assert d.n == 0 and s.state.source == ""  # bob never drafts from alice's text
    d = s.propose(_ctx([9, 9, 2, 3, 4], tenant="alice"))
    assert d.tokens.tolist()[:2] == [5, 6] and s.state.source == "cache"
    off = SuffixDecoding(cap_mb=0)
    d = off.propose(_ctx([7, 1, 2, 3, 4, 1, 2]))  # nothing cached: its own context, as prompt lookup
    assert d.tokens.tolist() == [3, 4, 1, 2] and d.is_chain and d.q is None and off.state.source == "lookup"


def test_a_finished_requests_last_tokens_are_stored_and_rows_release_theirs():
    s = SuffixDecoding()
    run = [1, 2, 3]
    s.propose(_ctx(run))
    run += [4, 5, 6]  # the last step accepted three tokens; no call came after it
    s.propose(_ctx([7]))  # the next request
    assert s.cache.walk(s.state.ns, [1, 2, 3, 4, 5, 6]).count == 1
    form = s.form
    state = form.new_state()
    row = [8, 9, 10]
    form.propose([state], [_ctx(row)])
    row += [11, 12]
    form.release(state)
    assert s.cache.walk(s.cache.namespace(None), [8, 9, 10, 11, 12]).count == 1 and state.doc is None


def test_a_replaced_cache_leaves_the_old_states_behind():
    s = SuffixDecoding()
    old = s.form.new_state()
    s.form.propose([old], [_ctx([1, 2, 3])])
    s.configure(8.0)  # as ``specdec serve --suffix-cache-mb`` does
    new = s.form.new_state()
    s.form.propose([new], [_ctx([4, 5, 6])])
    s.form.release(old)  # a row of the old cache ends after the swap: nothing of it lands here
    ns = s.cache.namespace(None)
    assert s.cache.walk(ns, [1]) is None and s.cache.walk(ns, [4, 5]).count == 1 and s.cache.cap == 8 * 2**20


def test_a_request_whose_document_was_evicted_goes_on_without_refeeding_it():
    s = SuffixDecoding(cap_mb=0.01)  # ~38 nodes: a few tokens of novel text
    run = list(range(100, 104))
    s.propose(_ctx(run))
    first = s.state.doc
    run += list(range(200, 240))  # a long step: the document outgrows the cap and is evicted
    s.propose(_ctx(run))
    assert not s.cache.alive(first) and s.cache.nodes == 0
    run += [300, 301, 302]
    s.propose(_ctx(run))  # a new document with only what came after the eviction
    assert s.cache.alive(s.state.doc) and s.cache.doc_tokens(s.state.doc) == [239, 300, 301]


def test_the_benchs_cold_start_empties_the_cache():
    """``specdec/bench/run.py``'s ``cold`` clears every proposer's ``kept``: a timed request must
    not draft from its own warm-up runs."""
    s = SuffixDecoding()
    for n in range(2, 8):
        s.propose(_ctx([1, 2, 3, 4, 5, 6, 7][:n]))
    assert s.kept is s.cache and s.cache.nodes > 0
    s.kept.clear()
    assert s.cache.nodes == s.cache.tokens == s.cache.nbytes() == 0 and not s.cache.docs
    assert s.propose(_ctx([9, 1, 2, 3])).n == 0  # nothing left to draft from, and no error
