"""FR-Spec's draft vocabulary (specdec/proposers/vocab_subset.py): ranking, coverage, the file, and
the head read on a subset of rows: -inf outside, normalised inside, the same ranking inside as the
full head's."""

from __future__ import annotations

import pytest
import torch

from specdec.models import packed as P
from specdec.proposers import vocab_subset as V


def test_frequent_ranks_by_count_then_id_and_returns_ascending_ids():
    seqs = [[5, 5, 5, 2, 9], [9, 9, 1, 7, 7]]
    assert V.frequent(seqs, 2) == [5, 9]  # 5 x3, 9 x3 before 7 x2
    assert V.frequent(seqs, 3) == [5, 7, 9]
    assert V.coverage(seqs, [5, 9]) == pytest.approx(6 / 10)
    assert V.coverage([], [1]) == 0.0


def test_the_file_round_trips_and_bad_files_are_refused(tmp_path):
    assert V.load(tmp_path) is None
    V.save(tmp_path, [9, 3, 4])
    assert V.load(tmp_path).tolist() == [3, 4, 9]
    (tmp_path / V.FILE).write_text('{"ids": [4, 3]}')
    with pytest.raises(ValueError, match="ascending"):
        V.load(tmp_path)


def test_subset_head_logp_is_the_full_heads_restricted_and_renormalised():
    torch.manual_seed(0)
    w, b = torch.randn(50, 8), torch.randn(50)
    ids = torch.tensor([1, 4, 7, 30, 49])
    head = V.SubsetHead(P.Linear(w, b), ids, 50)
    x = torch.randn(3, 8)
    lp = head.logp(x)
    assert lp.shape == (3, 50)
    outside = torch.ones(50, dtype=torch.bool)
    outside[ids] = False
    assert torch.isinf(lp[:, outside]).all() and (lp[:, outside] < 0).all()
    torch.testing.assert_close(lp[:, ids].exp().sum(-1), torch.ones(3))
    full = torch.log_softmax(x @ w.T + b, -1)[:, ids]
    torch.testing.assert_close(lp[:, ids], torch.log_softmax(full, -1))
    with pytest.raises(ValueError, match="vocabulary"):
        V.SubsetHead(P.Linear(w, b), torch.tensor([3, 60]), 50)
