"""Medusa candidate trees as lists of index paths, and the search that chooses one.

Contract
--------
A tree is a list of paths; a path ``(r_1, ..., r_d)`` names the node whose token at depth i is
head i's rank-r_i candidate (rank 0 = its most likely token), so ``(0,)`` is head 1's top token
and ``(0, 1)`` is head 2's second token placed under it. A valid tree contains every prefix of
each of its paths and, for every node ``(..., r)`` with r > 0, its elder sibling ``(..., r-1)``.

- ``tree_order(paths) -> (paths, parents)``: the paths sorted by depth, then lexicographically
  (so parents come first and siblings are in rank order, the order verification tries them in),
  with each node's parent index (-1 = the root, i.e. the pending token). Raises ``ValueError``
  for an invalid tree.
- ``best_tree(acc, budget)``: given ``acc[i][r]``, the measured probability that head i+1's rank-r
  candidate is the target's token, returns the tree of at most ``budget`` nodes maximising the
  expected accepted length sum over nodes of prod_i acc[i][r_i] (each node is accepted when every
  node on its path is; heads treated as independent, as in Medusa). Node values only shrink along
  a path and along a rank-ordered sibling list, so taking the ``budget`` best nodes from a frontier
  of (first child, next sibling) candidates is optimal for this objective.
- ``expected_length(paths, acc)`` evaluates the objective; ``load_paths`` / ``save_paths`` read and
  write ``{"paths": [[...], ...], ...}`` JSON (a hand-written list works the same way).
"""
from __future__ import annotations

import heapq
import json
from pathlib import Path
from typing import Sequence

Path_ = tuple[int, ...]


def tree_order(paths: Sequence[Sequence[int]]) -> tuple[list[Path_], list[int]]:
    ps = sorted({tuple(int(r) for r in p) for p in paths}, key=lambda p: (len(p), p))
    index = {p: i for i, p in enumerate(ps)}
    parents: list[int] = []
    for p in ps:
        if not p or min(p) < 0:
            raise ValueError(f"invalid path {list(p)}: paths are non-empty lists of ranks >= 0")
        if len(p) > 1 and p[:-1] not in index:
            raise ValueError(f"path {list(p)} has no parent {list(p[:-1])} in the tree")
        if p[-1] > 0 and p[:-1] + (p[-1] - 1,) not in index:
            raise ValueError(f"path {list(p)} has no elder sibling {list(p[:-1] + (p[-1] - 1,))} in the tree")
        parents.append(index[p[:-1]] if len(p) > 1 else -1)
    return ps, parents


def _value(path: Path_, acc: Sequence[Sequence[float]]) -> float:
    v = 1.0
    for i, r in enumerate(path):
        v *= acc[i][r] if i < len(acc) and r < len(acc[i]) else 0.0
    return v


def expected_length(paths: Sequence[Sequence[int]], acc: Sequence[Sequence[float]]) -> float:
    """Expected accepted draft tokens per step (tau = this + 1) under independent heads."""
    return sum(_value(tuple(p), acc) for p in paths)


def best_tree(acc: Sequence[Sequence[float]], budget: int) -> list[Path_]:
    chosen: list[Path_] = []
    frontier = [(-_value((0,), acc), (0,))]
    while frontier and len(chosen) < budget:
        neg, p = heapq.heappop(frontier)
        if -neg <= 0.0:
            break
        chosen.append(p)
        if len(p) < len(acc):
            heapq.heappush(frontier, (-_value(p + (0,), acc), p + (0,)))
        if p[-1] + 1 < len(acc[len(p) - 1]):
            sib = p[:-1] + (p[-1] + 1,)
            heapq.heappush(frontier, (-_value(sib, acc), sib))
    return tree_order(chosen)[0]


def load_paths(path: Path) -> list[Path_]:
    data = json.loads(Path(path).read_text())
    paths = data["paths"] if isinstance(data, dict) else data
    return tree_order(paths)[0]


def save_paths(path: Path, paths: Sequence[Sequence[int]], **info) -> None:
    ordered = tree_order(paths)[0]
    Path(path).write_text(json.dumps({"paths": [list(p) for p in ordered], **info}, indent=1) + "\n")
