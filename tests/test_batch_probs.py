"""``rows.row_probs``: one ``to_probs`` per sampling setting over the rows that share it gives every
row exactly the p its own call gives (the verifier then sees the same floats as in a solo step)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from specdec.core.config import SamplingParams
from specdec.core.sampling import to_probs
from specdec.serving.batch.rows import row_probs


def _row(slot: int, sampling: SamplingParams, trie=None):
    return SimpleNamespace(slot=slot, trie=trie, spec=SimpleNamespace(sampling=sampling))


def test_grouped_probs_equal_each_rows_own_call():
    g = torch.Generator().manual_seed(0)
    settings = [
        SamplingParams(0.0),
        SamplingParams(0.7, top_k=50),
        SamplingParams(1.0, top_p=0.9),
        SamplingParams(0.0),
        SamplingParams(0.7, top_k=50, seed=3),  # the seed is no part of p: same group as row 1
        SamplingParams(1.3),
    ]
    q = [1, 3, 2, 5, 1, 4]  # rows score chains of different lengths
    logits = [3 * torch.randn(n, 4096, generator=g) for n in q]
    rows = [_row(s, sp) for s, sp in enumerate(settings)]
    got = row_probs(rows, logits)
    assert set(got) == set(range(len(rows)))
    for row in rows:
        sp = row.spec.sampling
        want = to_probs(logits[row.slot], sp.temperature, sp.top_k, sp.top_p)
        assert torch.equal(got[row.slot], want), row.slot


def test_a_healing_row_is_left_to_its_own_step():
    logits = [torch.randn(1, 16), torch.randn(2, 16)]
    rows = [_row(0, SamplingParams(0.0)), _row(1, SamplingParams(0.0), trie=object())]
    assert set(row_probs(rows, logits)) == {0}
