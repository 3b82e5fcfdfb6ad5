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
  of (first child, next sibling) candidates is optimal for this objective. With ``node_cost`` = b
  (the measured extra cost of one tree node in the target's verification forward, relative to a
  plain decoding step) the tree is cut to the prefix of those picks maximising the predicted
  speedup (1 + E[accepted]) / (1 + b n + h D), D the tree's depth and h = ``head_cost`` the cost
  of computing one more head (Medusa computes only the heads its tree reaches): more nodes and
  deeper trees are not free on a CPU. The result always has
  at least the node ``(0,)``, even for heads that never hit (a tree must be loadable).
- ``acc`` may instead be a ``Joint`` of measured path probabilities (``joint_from_ranks``): the
  same search then maximises the measured expected accepted length, without assuming the heads
  independent (they are not: when head 1 is right, head 2 is right more often).
- ``expected_length(paths, acc)`` evaluates the objective; ``load_paths`` / ``save_paths`` read and
  write ``{"paths": [[...], ...], ...}`` JSON (a hand-written list works the same way).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Sequence
from pathlib import Path

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


class Joint(dict):
    """Measured path values: ``Joint({path: P(every node on path is the target's token)})``, e.g.
    from ``joint_from_ranks``; used in place of the product of per-head accuracies."""


def joint_from_ranks(ranks: Sequence[Sequence[int]]) -> Joint:
    """``ranks[n][i]``: the rank of the target's token among head i+1's candidates at held-out
    position n (-1 = not among them). A path's value is the fraction of positions whose ranks
    start with it: the empirical joint probability, heads' errors correlated as they are."""
    counts: dict[Path_, int] = {}
    for row in ranks:
        prefix: Path_ = ()
        for r in row:
            if r < 0:
                break
            prefix = prefix + (int(r),)
            counts[prefix] = counts.get(prefix, 0) + 1
    n = max(1, len(ranks))
    return Joint({p: c / n for p, c in counts.items()})


def _value(path: Path_, acc) -> float:
    if isinstance(acc, Joint):
        return acc.get(tuple(path), 0.0)
    v = 1.0
    for i, r in enumerate(path):
        v *= acc[i][r] if i < len(acc) and r < len(acc[i]) else 0.0
    return v


def expected_length(paths: Sequence[Sequence[int]], acc: Sequence[Sequence[float]]) -> float:
    """Expected accepted draft tokens per step (tau = this + 1) under independent heads."""
    return sum(_value(tuple(p), acc) for p in paths)


def best_tree(
    acc: Sequence[Sequence[float]], budget: int, node_cost: float = 0.0, head_cost: float = 0.0
) -> list[Path_]:
    chosen = _greedy_nodes(acc, budget) or [(0,)]  # heads that never hit still get the smallest tree
    if node_cost > 0.0 or head_cost > 0.0:  # keep the prefix of the picks with the best tokens per unit of cost

        def ratio(n: int) -> float:
            depth = max((len(p) for p in chosen[:n]), default=0)  # heads computed: as deep as the tree
            return (1.0 + expected_length(chosen[:n], acc)) / (1.0 + node_cost * n + head_cost * depth)

        chosen = chosen[: max(1, max(range(len(chosen) + 1), key=ratio))]
    return tree_order(chosen)[0]


def _greedy_nodes(acc: Sequence[Sequence[float]], budget: int) -> list[Path_]:
    """The ``budget`` most valuable nodes in the order picked (each pick keeps a valid tree)."""
    chosen: list[Path_] = []
    frontier = [(-_value((0,), acc), (0,))]
    while frontier and len(chosen) < budget:
        neg, p = heapq.heappop(frontier)
        if -neg <= 0.0:
            break
        chosen.append(p)
        if len(p) < _depth(acc):
            heapq.heappush(frontier, (-_value(p + (0,), acc), p + (0,)))
        if isinstance(acc, Joint) or p[-1] + 1 < len(acc[len(p) - 1]):
            sib = p[:-1] + (p[-1] + 1,)
            heapq.heappush(frontier, (-_value(sib, acc), sib))
    return chosen


def _depth(acc) -> int:
    return max((len(p) for p in acc), default=0) if isinstance(acc, Joint) else len(acc)


def load_paths(path: Path) -> list[Path_]:
    data = json.loads(Path(path).read_text())
    paths = data["paths"] if isinstance(data, dict) else data
    return tree_order(paths)[0]


def save_paths(path: Path, paths: Sequence[Sequence[int]], **info) -> None:
    ordered = tree_order(paths)[0]
    Path(path).write_text(json.dumps({"paths": [list(p) for p in ordered], **info}, indent=1) + "\n")
