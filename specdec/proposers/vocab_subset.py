"""A reduced draft vocabulary (FR-Spec: Zhao et al. 2025, "FR-Spec: Accelerating Large-Vocabulary
Language Models via Frequency-Ranked Speculative Sampling", arXiv:2502.14856).

Contract: ``frequent(sequences, n)`` ranks token ids by how often they occur in ``sequences`` and
returns the ``n`` most frequent, sorted ascending (ties by id); ``save(folder, ids)`` /
``load(folder)`` keep them as ``draft_vocab.json`` beside a head's weights (``None`` when the file
is absent: the full vocabulary). ``SubsetHead(head, ids)`` computes a head's logits on those rows
only and returns full-vocabulary log-probabilities, ``-inf`` outside the subset, normalised over
it; ``coverage(sequences, ids)`` is the fraction of tokens the subset holds.

Why: a head that drafts through the target's LM head (EAGLE, tied Medusa) pays a vocabulary-wide
product per tree level. SmolLM2's head is 49,152 x 576, about a fifth of the model's weights: in
float32 it reads more bytes than the target's whole 4-bit step. Restricted to the few thousand
tokens that carry almost all of its chat text, the draft costs a fraction of that.

Why it stays exact: the verifier only needs the draft's tokens (EAGLE's tree is deterministic,
q = None) or, for a sampled draft, the distribution q it really sampled from. A draft that never
proposes a token outside the subset changes which tokens are tried, so acceptance, never what is
emitted: the target's p decides every token (``specdec/core/verify.py``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import torch

FILE = "draft_vocab.json"


def frequent(sequences: Iterable[Iterable[int]], n: int) -> list[int]:
    counts: Counter[int] = Counter()
    for s in sequences:
        counts.update(s)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return sorted(t for t, _ in ranked[:n])


def coverage(sequences: Iterable[Iterable[int]], ids: Iterable[int]) -> float:
    keep, hit, total = set(ids), 0, 0
    for s in sequences:
        for t in s:
            hit += t in keep
            total += 1
    return hit / total if total else 0.0


def save(folder: Path, ids: list[int]) -> Path:
    path = Path(folder) / FILE
    path.write_text(json.dumps({"ids": sorted(int(t) for t in ids)}) + "\n")
    return path


def load(folder: Path) -> torch.Tensor | None:
    path = Path(folder) / FILE
    if not path.exists():
        return None
    ids = json.loads(path.read_text())["ids"]
    if not ids or ids != sorted(set(ids)):
        raise ValueError(f"{path}: ids must be a non-empty ascending list of distinct token ids")
    return torch.tensor(ids, dtype=torch.long)


class SubsetHead:
    """``head`` (a ``packed.Linear``, or anything with ``weight``, ``bias``) read on rows ``ids`` only."""

    def __init__(self, head, ids: torch.Tensor, vocab: int) -> None:
        from specdec.models import packed as P

        if int(ids.max()) >= vocab:
            raise ValueError(f"draft vocabulary has id {int(ids.max())}, the model's vocabulary is {vocab}")
        self.ids, self.vocab = ids.to(head.weight.device), vocab
        bias = None if head.bias is None else head.bias[self.ids].contiguous()
        self.linear = P.Linear(head.weight[self.ids].contiguous(), bias)

    def logp(self, feats: torch.Tensor) -> torch.Tensor:
        sub = torch.log_softmax(self.linear(feats).float(), -1)
        out = torch.full((*sub.shape[:-1], self.vocab), float("-inf"), dtype=sub.dtype, device=sub.device)
        out[..., self.ids] = sub
        return out
