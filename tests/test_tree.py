"""specdec.core.tree: structure queries, validation, tree attention mask and positions."""

from __future__ import annotations

import pytest
import torch

from specdec.core.tree import Draft, position_ids, tree_attention_mask

#        root (pending)
#        /           \
#     n0 (10)       n1 (11)
#     /     \
#  n2 (12)  n3 (13)
#    |
#  n4 (14)
TREE = Draft.from_parents([10, 11, 12, 13, 14], [-1, -1, 0, 0, 2])


def test_structure_queries() -> None:
    assert TREE.n == 5 and not TREE.is_chain
    assert TREE.tokens.dtype == torch.long
    assert TREE.depths() == [1, 1, 2, 2, 3]
    assert TREE.children(-1) == [0, 1]
    assert TREE.children(0) == [2, 3]
    assert TREE.children(1) == [] and TREE.children(3) == [] and TREE.children(4) == []
    assert TREE.children(2) == [4]
    assert TREE.path_to(4) == [0, 2, 4]
    assert TREE.path_to(1) == [1]
    with pytest.raises(IndexError):
        TREE.path_to(-1)
    with pytest.raises(IndexError):
        TREE.children(5)


def test_chain_and_empty() -> None:
    chain = Draft.chain(torch.tensor([7, 8, 9]))
    assert chain.parents == (-1, 0, 1) and chain.is_chain and chain.q is None
    assert chain.depths() == [1, 2, 3] and chain.path_to(2) == [0, 1, 2]
    empty = Draft.empty()
    assert empty.n == 0 and empty.is_chain and empty.children(-1) == []
    assert Draft.chain([]).n == 0


@pytest.mark.parametrize(
    ("tokens", "parents"),
    [([1, 2], [-1]), ([1, 2], [-1, 1]), ([1, 2], [-1, 2]), ([1, 2], [-2, 0]), ([1], [0])],
)
def test_bad_parents_raise(tokens: list[int], parents: list[int]) -> None:
    with pytest.raises(ValueError, match="parent"):
        Draft.from_parents(tokens, parents)


def test_bad_tokens_and_q_raise() -> None:
    with pytest.raises(ValueError):
        Draft.chain(torch.tensor([[1, 2]]))
    with pytest.raises(ValueError):
        Draft.chain(torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="q must have shape"):
        Draft.chain([1, 2], q=torch.full((3, 4), 0.25))
    q = Draft.chain([1, 2], q=torch.full((2, 4), 0.25, dtype=torch.float64)).q
    assert q is not None and q.dtype == torch.float32


def test_tree_mask_and_positions() -> None:
    prefix_len = 2
    mask = tree_attention_mask(TREE, prefix_len)
    assert mask.shape == (1, 1, 6, 2 + 6) and mask.dtype == torch.float32
    #                  prefix   pend n0 n1 n2 n3 n4
    expected = torch.tensor(
        [
            [1, 1, 1, 0, 0, 0, 0, 0],  # pending
            [1, 1, 1, 1, 0, 0, 0, 0],  # n0
            [1, 1, 1, 0, 1, 0, 0, 0],  # n1
            [1, 1, 1, 1, 0, 1, 0, 0],  # n2: pending, n0, itself
            [1, 1, 1, 1, 0, 0, 1, 0],  # n3: pending, n0, itself
            [1, 1, 1, 1, 0, 1, 0, 1],  # n4: pending, n0, n2, itself
        ],
        dtype=torch.bool,
    )
    assert torch.equal(mask[0, 0] == 0, expected)
    assert (mask[0, 0][~expected] == torch.finfo(torch.float32).min).all()
    assert position_ids(TREE, prefix_len).tolist() == [[2, 3, 3, 4, 4, 5]]
    half = tree_attention_mask(TREE, prefix_len, dtype=torch.float16)
    assert half.dtype == torch.float16 and half.min() == torch.finfo(torch.float16).min


def test_chain_mask_is_causal() -> None:
    chain, prefix_len = Draft.chain([4, 5, 6, 7]), 3
    visible = tree_attention_mask(chain, prefix_len)[0, 0] == 0
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.equal(visible, torch.cat([torch.ones(5, prefix_len, dtype=torch.bool), causal], 1))
    assert position_ids(chain, prefix_len).tolist() == [[3, 4, 5, 6, 7]]


def test_empty_draft_mask() -> None:
    mask = tree_attention_mask(Draft.empty(), 4)
    assert mask.shape == (1, 1, 1, 5) and (mask == 0).all()
    assert position_ids(Draft.empty(), 4).tolist() == [[4]]
    assert tree_attention_mask(TREE, 0).shape == (1, 1, 6, 6)
