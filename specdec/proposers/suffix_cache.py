"""A bounded suffix trie over the token ids of many documents, shared across requests, per namespace.

Contract (pure logic, no torch, no threads: the caller serialises access, as the model thread does):
- ``SuffixCache(cap_mb, depth, shared)``: every substring of length <= ``depth`` of every document
  is a path from its namespace's root; a node's ``count`` is how many times its substring occurs
  in the namespace's documents (within the depth bound), so a child's count over the sum of its
  siblings' is the empirical probability of that token after that substring (SuffixDecoding,
  Oliaro et al., arXiv:2411.04975, on a depth-bounded trie instead of a compressed suffix tree).
- Documents: ``open(ns) -> doc id``; ``extend(doc, tokens)`` appends tokens to a document (O(depth)
  per token: a frontier of the open paths, one per start position still shorter than ``depth``);
  ``close(doc)`` drops the frontier (the text stays until evicted). ``alive(doc)`` says whether it
  is still held. Opening or extending a document makes it the most recently used.
- Memory: ``nbytes()`` = nodes x ``NODE_BYTES`` + stored tokens x ``TOKEN_BYTES`` (estimates of
  CPython's sizes, measured in docs/suffix.md). After every extension the least recently used
  documents are evicted whole (their counts decremented along every path, nodes at zero removed)
  until ``nbytes() <= cap``; the document being extended goes last, so a cap smaller than one
  document empties the cache rather than exceeding it. ``cap_mb = 0`` stores nothing.
- Namespaces: each tenant's documents live under its own root, so ``match`` in one namespace never
  sees another's text. ``shared=True`` maps every tenant to one namespace (configured, not default).
- ``match(ns, context, max_len, min_len)``: the longest suffix of ``context`` (at most ``max_len``
  tokens, at least ``min_len``) that is a path with at least one child, as ``(node, length)``, or
  ``(None, 0)``. Existence of a suffix is monotone in its length (a trie of all substrings is closed
  under suffixes), so the longest existing one is found by bisection; then shorter ones are tried
  until one has a continuation.
- ``tree(node, max_nodes, min_prob)``: the most frequent continuations below ``node`` as a tree,
  best-first by path score (the product of empirical probabilities along the path), children whose
  empirical probability is below ``min_prob`` left out; returns ``(tokens, parents, scores)`` in
  topological order with siblings in descending score, ties broken by token id (a function of the
  counts alone: the same cache gives the same tree).
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Sequence

NODE_BYTES = 270  # a slotted node plus its children dict, CPython 3.11-3.13 (docs/suffix.md)
TOKEN_BYTES = 8  # one list slot per stored token id
SHARED = "shared"
_DOC_IDS = itertools.count()  # unique across caches: a state holding a replaced cache's id finds nothing


class Node:
    __slots__ = ("kids", "count")

    def __init__(self) -> None:
        self.kids: dict[int, Node] | None = None
        self.count = 0


class _Doc:
    __slots__ = ("ns", "tokens", "frontier")

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.tokens: list[int] = []
        self.frontier: list[Node] | None = []  # nodes of the paths still shorter than depth; None = closed


class SuffixCache:
    def __init__(self, cap_mb: float = 64.0, depth: int = 16, shared: bool = False) -> None:
        if cap_mb < 0:
            raise ValueError(f"the suffix cache's cap must be >= 0 MB, got {cap_mb}")
        if depth < 2:
            raise ValueError(f"the suffix trie's depth must be >= 2, got {depth}")
        self.cap = int(cap_mb * 2**20)
        self.depth = depth
        self.shared = shared
        self.roots: dict[str, Node] = {}
        self.docs: OrderedDict[int, _Doc] = OrderedDict()  # least recently used first
        self.nodes = 0
        self.tokens = 0
        self.evicted = 0  # documents evicted so far

    # -- namespaces and documents -------------------------------------------------------------
    def namespace(self, tenant: str | None) -> str:
        """The namespace a tenant's documents go to: its own, or the one shared namespace."""
        return SHARED if self.shared else f"tenant:{tenant or ''}"

    def open(self, ns: str) -> int:
        doc_id = next(_DOC_IDS)
        self.docs[doc_id] = _Doc(ns)
        return doc_id

    def alive(self, doc_id: int) -> bool:
        return doc_id in self.docs

    def close(self, doc_id: int) -> None:
        doc = self.docs.get(doc_id)
        if doc is not None:
            doc.frontier = None

    def doc_tokens(self, doc_id: int) -> list[int]:
        return list(self.docs[doc_id].tokens)

    def extend(self, doc_id: int, tokens: Sequence[int]) -> bool:
        """Append ``tokens`` to an open document; False (nothing stored) when the cache is off, the
        document was evicted or closed. Evicts down to the cap afterwards."""
        doc = self.docs.get(doc_id)
        if doc is None or doc.frontier is None or self.cap == 0:
            return False
        self.docs.move_to_end(doc_id)
        root = self.roots.get(doc.ns)
        if root is None:
            root = self.roots[doc.ns] = Node()
        keep = self.depth - 1
        frontier = doc.frontier
        for t in tokens:
            t = int(t)
            grown = []
            for node in (root, *frontier):
                grown.append(self._child(node, t))
            frontier = grown[:keep]
            doc.tokens.append(t)
        doc.frontier = frontier
        self.tokens += len(tokens)
        self._evict(doc_id)
        return self.alive(doc_id)

    def _child(self, node: Node, t: int) -> Node:
        kids = node.kids
        if kids is None:
            kids = node.kids = {}
        child = kids.get(t)
        if child is None:
            child = kids[t] = Node()
            self.nodes += 1
        child.count += 1
        return child

    # -- memory -------------------------------------------------------------------------------
    def nbytes(self) -> int:
        return self.nodes * NODE_BYTES + self.tokens * TOKEN_BYTES

    def _evict(self, current: int) -> None:
        while self.docs and self.nbytes() > self.cap:
            oldest = next(iter(self.docs))
            if oldest == current and len(self.docs) > 1:
                self.docs.move_to_end(current)  # the document being extended goes last
                continue
            self.remove(oldest)
            self.evicted += 1

    def remove(self, doc_id: int) -> None:
        """Forget a document: its counts come off every path; nodes at zero go."""
        doc = self.docs.pop(doc_id)
        root = self.roots.get(doc.ns)
        toks, n = doc.tokens, len(doc.tokens)
        for i in range(n):
            node = root
            for t in toks[i : min(n, i + self.depth)]:
                child = node.kids[t]
                child.count -= 1
                if child.count == 0:
                    del node.kids[t]
                    self.nodes -= 1
                node = child
        self.tokens -= n
        if root is not None and not root.kids:
            del self.roots[doc.ns]

    # -- lookup -------------------------------------------------------------------------------
    def walk(self, ns: str, path: Sequence[int]) -> Node | None:
        node = self.roots.get(ns)
        for t in path:
            if node is None or node.kids is None:
                return None
            node = node.kids.get(int(t))
        return node

    def match(self, ns: str, context: Sequence[int], max_len: int, min_len: int = 1) -> tuple[Node | None, int]:
        hi = min(max_len, len(context), self.depth - 1)
        if ns not in self.roots or hi < min_len:
            return None, 0
        lo = min_len - 1  # invariant: a suffix of length lo exists (0: the root), hi+1.. unknown
        if self.walk(ns, context[len(context) - min_len :]) is None:
            return None, 0
        lo = min_len
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.walk(ns, context[len(context) - mid :]) is not None:
                lo = mid
            else:
                hi = mid - 1
        for m in range(lo, min_len - 1, -1):
            node = self.walk(ns, context[len(context) - m :])
            if node is not None and node.kids:
                return node, m
        return None, 0

    @staticmethod
    def tree(node: Node, max_nodes: int, min_prob: float = 0.1) -> tuple[list[int], list[int], list[float]]:
        tokens: list[int] = []
        parents: list[int] = []
        scores: list[float] = []
        heap: list = []
        order = 0

        def push(parent_node: Node, parent_index: int, parent_score: float) -> None:
            nonlocal order
            kids = parent_node.kids
            if not kids:
                return
            total = sum(c.count for c in kids.values())
            for t, child in sorted(kids.items(), key=lambda kv: (-kv[1].count, kv[0])):
                prob = child.count / total
                if prob < min_prob:
                    break  # sorted by count: the rest are rarer still
                score = parent_score * prob
                heapq.heappush(heap, (-score, order, t, child, parent_index))
                order += 1

        push(node, -1, 1.0)
        while heap and len(tokens) < max_nodes:
            neg, _, t, child, parent_index = heapq.heappop(heap)
            tokens.append(t)
            parents.append(parent_index)
            scores.append(-neg)
            push(child, len(tokens) - 1, -neg)
        return tokens, parents, scores

    def clear(self) -> None:
        """Forget every document (the bench's cold start, ``specdec/bench/run.py``)."""
        self.roots.clear()
        self.docs.clear()
        self.nodes = self.tokens = 0

    def stats(self) -> dict:
        return {
            "documents": len(self.docs),
            "namespaces": len(self.roots),
            "nodes": self.nodes,
            "tokens": self.tokens,
            "bytes": self.nbytes(),
            "cap_bytes": self.cap,
            "evicted": self.evicted,
        }
