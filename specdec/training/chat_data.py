"""Training tensors from the self-distilled chat text (``selfdistill.py``), for heads and draft.

Contract: ``ChatSet.build(rows, held_every)`` pads the cached rows (prompt + the target's own
completion, with its last hidden states) into
- ``ids`` int64 [N, L + 1] (EOS-padded), ``hidden`` fp16 [N, L, H] (zeros past a row's end),
- ``start`` [N]: the position whose output is the first completion token (prompt length - 1),
- ``end`` [N]: the number of positions fed (hidden rows that exist),
and splits the rows: every ``held_every``-th row by answer id is held out for validation (the Medusa tree is
chosen on it; acceptance itself is measured by the engine on the separate held-out prompts).
``loss_mask(start, end, T, shift)`` marks the positions j (of T) whose label ``ids[j + 1 + shift]``
is completion text: the heads and the draft learn what the target writes, not the prompt.
``vocab_subset(ids, n_frequent)`` is the sorted set of token ids the losses' softmax runs over:
every id in the text plus the ``n_frequent`` lowest ids (BPE's most frequent merges) as extra
negatives. Why a subset: a 49,152-way softmax per position and head is most of a training step on
this CPU; on greedy text the label is always in the subset and the rest of the vocabulary is
rarely a close competitor. Decoding always uses the whole vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ChatSet:
    ids: torch.Tensor
    hidden: torch.Tensor
    start: torch.Tensor
    end: torch.Tensor

    @staticmethod
    def pad(rows: list[dict], eos: int) -> ChatSet:
        L = max(len(r["hidden"]) for r in rows)
        H = rows[0]["hidden"].shape[-1]
        ids = torch.full((len(rows), L + 1), eos, dtype=torch.long)
        hidden = torch.zeros(len(rows), L, H, dtype=torch.float16)
        start, end = torch.zeros(len(rows), dtype=torch.long), torch.zeros(len(rows), dtype=torch.long)
        for i, r in enumerate(rows):
            seq = r["prompt"] + r["completion"]
            ids[i, : len(seq)] = torch.tensor(seq)
            hidden[i, : len(r["hidden"])] = r["hidden"]
            start[i], end[i] = len(r["prompt"]) - 1, len(r["hidden"])
        return ChatSet(ids, hidden, start, end)

    @staticmethod
    def build(rows: list[dict], eos: int, held_every: int = 12) -> tuple[ChatSet, ChatSet]:
        """Every ``held_every``-th row by its stable ``index`` (the answer's id) is held out, in id
        order: load order follows the feature files, which change as a set grows, so a split by
        position moved answers between train and validation under a resumed checkpoint."""
        rows = sorted(rows, key=lambda r: r.get("index", 0))
        split = [(r.get("index", i) % held_every == held_every - 1, r) for i, r in enumerate(rows)]
        train, held = [r for h, r in split if not h], [r for h, r in split if h]
        return ChatSet.pad(train, eos), ChatSet.pad(held, eos)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def completion_tokens(self) -> int:
        return int((self.end - self.start).sum())


def loss_mask(start: torch.Tensor, end: torch.Tensor, T: int, shift: int = 0) -> torch.Tensor:
    """[N, T] bool: position j's label ids[j + 1 + shift] is a completion token of the row."""
    j = torch.arange(T)[None]
    return (j >= start[:, None]) & (j + shift < end[:, None])


def vocab_subset(ids: torch.Tensor, n_frequent: int = 4096) -> torch.Tensor:
    return torch.unique(torch.cat([ids.flatten(), torch.arange(n_frequent)]))


def remap(labels: torch.Tensor, subset: torch.Tensor) -> torch.Tensor:
    """Token ids -> their index in ``subset`` (every label must be in it)."""
    return torch.searchsorted(subset, labels)
