"""Medusa's heads in plain torch (Cai et al., 2024, section 2.1.1).

Contract: ``MedusaHeads(hidden, vocab, n_heads)``: head k (k = 1..n_heads) maps the target's last
hidden state h_t (the LM head's input at the position whose output is the pending token x_{t+1})
to logits for token x_{t+1+k}: ``W_k (h + SiLU(A_k h + b_k))``, a residual SiLU block and a
projection to the vocabulary. ``tied=True`` heads keep no projection of their own: every W_k is the
target's LM head (``tie(lm_head)``; ``load`` ties to ``target_model``), so a folder holds only the
blocks (a 49,152 x 576 projection per head would be 57 MB each for SmolLM2).
``forward(h) -> [..., n_heads, V]`` is the training path; decoding runs the same math in
``proposer.py``, only for the heads its tree reaches. ``load(folder)``
reads a folder in the shared head format (``proposers/folder.py``).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from specdec.proposers.folder import load_state, read_config


class MedusaHeads(nn.Module):
    kind = "medusa"

    def __init__(self, hidden: int, vocab: int, n_heads: int = 4, tied: bool = False) -> None:
        super().__init__()
        self.config = {"kind": self.kind, "hidden": hidden, "vocab": vocab, "n_heads": n_heads}
        if tied:
            self.config["tied"] = True
        self.block = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(n_heads))
        self.proj = None if tied else nn.ModuleList(nn.Linear(hidden, vocab, bias=False) for _ in range(n_heads))
        self._shared: list[nn.Module] = []  # the target's LM head when tied (not a submodule: not saved)
        for b in self.block:  # start as the identity: each head begins as the target's LM head
            nn.init.zeros_(b.weight)
            nn.init.zeros_(b.bias)

    @property
    def n_heads(self) -> int:
        return len(self.block)

    @property
    def projections(self) -> list[nn.Module]:
        """W_1..W_K: the heads' own projections, or the target's LM head K times when tied."""
        if self.proj is not None:
            return list(self.proj)
        if not self._shared:
            raise ValueError("tied Medusa heads need the target's LM head: call tie(lm_head) first")
        return self._shared * self.n_heads

    def tie(self, lm_head: nn.Module) -> None:
        self._shared = [lm_head]

    def init_from_lm_head(self, weight: torch.Tensor) -> None:
        with torch.no_grad():
            for p in self.proj or []:
                p.weight.copy_(weight)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Logits of every head, stacked on dim -2."""
        return torch.stack([p(h + F.silu(b(h))) for b, p in zip(self.block, self.projections)], dim=-2)

    @classmethod
    def load(cls, folder: Path, device="cpu", dtype: torch.dtype = torch.float32, target_model=None) -> MedusaHeads:
        heads = load_state(cls(**read_config(folder, target_model, cls.kind)), folder, device, dtype)
        if heads.proj is None and target_model is not None:
            heads.tie(target_model.get_output_embeddings())
        return heads
