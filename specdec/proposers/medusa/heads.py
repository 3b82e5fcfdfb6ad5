"""Medusa's heads in plain torch (Cai et al., 2024, section 2.1.1).

Contract: ``MedusaHeads(hidden, vocab, n_heads)``: head k (k = 1..n_heads) maps the target's last
hidden state h_t (the LM head's input at the position whose output is the pending token x_{t+1})
to logits for token x_{t+1+k}: ``W_k (h + SiLU(A_k h + b_k))``, a residual SiLU block and a
projection to the vocabulary. ``forward(h) -> [..., n_heads, V]`` is the training path; decoding
runs the same math in ``proposer.py``, only for the heads its tree reaches. ``load(folder)``
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

    def __init__(self, hidden: int, vocab: int, n_heads: int = 4) -> None:
        super().__init__()
        self.config = {"kind": self.kind, "hidden": hidden, "vocab": vocab, "n_heads": n_heads}
        self.block = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(n_heads))
        self.proj = nn.ModuleList(nn.Linear(hidden, vocab, bias=False) for _ in range(n_heads))
        for b in self.block:  # start as the identity: each head begins as the target's LM head
            nn.init.zeros_(b.weight)
            nn.init.zeros_(b.bias)

    @property
    def n_heads(self) -> int:
        return len(self.proj)

    def init_from_lm_head(self, weight: torch.Tensor) -> None:
        with torch.no_grad():
            for p in self.proj:
                p.weight.copy_(weight)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Logits of every head, stacked on dim -2."""
        return torch.stack([p(h + F.silu(b(h))) for b, p in zip(self.block, self.proj)], dim=-2)

    @classmethod
    def load(cls, folder: Path, device="cpu", dtype: torch.dtype = torch.float32, target_model=None) -> MedusaHeads:
        return load_state(cls(**read_config(folder, target_model, cls.kind)), folder, device, dtype)
