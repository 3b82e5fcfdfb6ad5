"""A draft: the tokens a proposer offers for verification, as a chain or a tree.

Contract
--------
``Draft(tokens, parents, q)`` holds ``n`` nodes:

- ``tokens``: 1-D long tensor, the token id of each node;
- ``parents``: the parent node index of each node, ``-1`` meaning the root, i.e. the pending token
  (the last emitted token, not yet in the target's cache). Nodes are topologically ordered
  (``parents[i] < i``) and siblings appear in proposal order, which is the order verification
  tries them in;
- ``q``: float32 ``[n, V]``, row ``i`` the draft distribution node ``i``'s token was sampled from
  (after the same ``to_probs`` as the target, invariant I3); ``None`` means a deterministic draft,
  i.e. each q row is one-hot at the node's own token.

A chain is the special case ``parents == (-1, 0, 1, ..., n-2)``; the empty draft (``n == 0``) is a
plain decoding step (invariant I2).

``tree_attention_mask`` and ``position_ids`` describe how to score ``[pending] + draft tokens`` in
one target forward after a cache of ``prefix_len`` positions, with no change to the model code:
each node sees the whole prefix, the pending token, its ancestors and itself, and sits at position
``prefix_len + depth`` (the pending token at depth 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import torch

__all__ = ["Draft", "tree_attention_mask", "position_ids"]

TokensLike = torch.Tensor | Sequence[int]


def _as_tokens(tokens: TokensLike) -> torch.Tensor:
    t = torch.as_tensor(tokens) if not isinstance(tokens, torch.Tensor) else tokens
    if t.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=t.device)
    if t.dim() != 1:
        raise ValueError(f"tokens must be 1-D, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"tokens must be integer ids, got dtype {t.dtype}")
    return t.long()


def _check_parents(parents: tuple[int, ...], n: int) -> None:
    if len(parents) != n:
        raise ValueError(f"need one parent per node: {n} tokens but {len(parents)} parents")
    for i, parent in enumerate(parents):
        if not -1 <= parent < i:
            raise ValueError(
                f"node {i} has parent {parent}: parents must be -1 (the root) or an earlier node "
                "index (nodes are topologically ordered)"
            )


def _check_q(q: torch.Tensor, n: int) -> torch.Tensor:
    if q.dim() != 2 or q.shape[0] != n or q.shape[1] == 0:
        raise ValueError(f"q must have shape [n={n}, V], got {tuple(q.shape)}")
    if not q.is_floating_point():
        raise ValueError(f"q must hold probabilities (floating point), got dtype {q.dtype}")
    return q.float()


@dataclass(frozen=True, eq=False)  # eq=False: tensors have no truth value; compare fields instead
class Draft:
    """Draft tokens with their tree structure and (optionally) their draft distributions q."""

    tokens: torch.Tensor
    parents: tuple[int, ...]
    q: torch.Tensor | None = None

    def __post_init__(self) -> None:
        tokens = _as_tokens(self.tokens)
        parents = tuple(int(p) for p in self.parents)
        _check_parents(parents, tokens.numel())
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "parents", parents)
        if self.q is not None:
            object.__setattr__(self, "q", _check_q(self.q, tokens.numel()))

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def empty(cls) -> Draft:
        """No draft tokens: the step is a plain decoding step."""
        return cls(torch.empty(0, dtype=torch.long), ())

    @classmethod
    def chain(cls, tokens: TokensLike, q: torch.Tensor | None = None) -> Draft:
        """A linear draft: node i's parent is node i-1 (node 0 hangs off the root)."""
        tokens = _as_tokens(tokens)
        return cls(tokens, tuple(range(-1, tokens.numel() - 1)), q)

    @classmethod
    def from_parents(cls, tokens: TokensLike, parents: Sequence[int], q: torch.Tensor | None = None) -> Draft:
        """A tree given by each node's parent index (-1 = root); raises ValueError if malformed."""
        return cls(_as_tokens(tokens), tuple(int(p) for p in parents), q)

    # -- structure ----------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of draft nodes."""
        return len(self.parents)

    @property
    def is_chain(self) -> bool:
        return self.parents == tuple(range(-1, self.n - 1))

    @cached_property
    def _children(self) -> tuple[tuple[int, ...], ...]:
        """Entry 0: children of the root; entry i+1: children of node i, in proposal order."""
        kids: list[list[int]] = [[] for _ in range(self.n + 1)]
        for i, parent in enumerate(self.parents):
            kids[parent + 1].append(i)
        return tuple(tuple(k) for k in kids)

    @cached_property
    def _depths(self) -> tuple[int, ...]:
        depths: list[int] = []
        for parent in self.parents:
            depths.append(1 if parent < 0 else depths[parent] + 1)
        return tuple(depths)

    def children(self, node: int) -> list[int]:
        """Children of ``node`` in proposal order; ``node == -1`` is the root."""
        self._check_node(node, allow_root=True)
        return list(self._children[node + 1])

    def depths(self) -> list[int]:
        """Depth of every node; the root's children have depth 1."""
        return list(self._depths)

    def path_to(self, node: int) -> list[int]:
        """Node indices from depth 1 down to ``node`` (inclusive)."""
        self._check_node(node, allow_root=False)
        path: list[int] = []
        while node >= 0:
            path.append(node)
            node = self.parents[node]
        return path[::-1]

    def _check_node(self, node: int, allow_root: bool) -> None:
        low = -1 if allow_root else 0
        if not low <= node < self.n:
            raise IndexError(f"node {node} out of range [{low}, {self.n}) for this draft")


def _visibility(draft: Draft) -> list[list[bool]]:
    """[n+1, n+1] booleans over [pending] + nodes: row i+1 sees pending, ancestors, itself."""
    rows = [[True] + [False] * draft.n]
    for i, parent in enumerate(draft.parents):
        row = list(rows[parent + 1])  # everything the parent sees (pending, its ancestors, it)
        row[i + 1] = True
        rows.append(row)
    return rows


def visible_nodes(draft: Draft) -> list[list[int]]:
    """Per query of ``[pending] + nodes`` the queries it sees, ascending: the pending token (0), its
    ancestors and itself (i + 1 for node i): the open part of ``tree_attention_mask`` as index lists."""
    return [[j for j, seen in enumerate(row) if seen] for row in _visibility(draft)]


def tree_attention_mask(draft: Draft, prefix_len: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Additive mask [1, 1, n+1, prefix_len+n+1]: 0 where visible, finfo(dtype).min elsewhere.

    Queries are ``[pending] + draft tokens``; keys are the ``prefix_len`` cached positions
    followed by the same ``n + 1`` new tokens. For a chain this is the ordinary causal mask.
    """
    if prefix_len < 0:
        raise ValueError(f"prefix_len must be >= 0, got {prefix_len}")
    visible = torch.tensor(_visibility(draft), dtype=torch.bool)
    blocked = torch.tensor(torch.finfo(dtype).min, dtype=dtype)
    new = torch.where(visible, torch.zeros((), dtype=dtype), blocked)
    mask = torch.zeros(1, 1, draft.n + 1, prefix_len + draft.n + 1, dtype=dtype)
    mask[0, 0, :, prefix_len:] = new
    return mask


def position_ids(draft: Draft, prefix_len: int) -> torch.Tensor:
    """Positions [1, n+1] (long): prefix_len for the pending token, prefix_len + depth per node."""
    if prefix_len < 0:
        raise ValueError(f"prefix_len must be >= 0, got {prefix_len}")
    return torch.tensor([[prefix_len + d for d in [0, *draft.depths()]]], dtype=torch.long)
