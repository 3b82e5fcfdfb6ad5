"""EAGLE's draft layer in plain torch (Li et al., 2024): the training module and its KV slots.

Contract:
- ``EagleLayer(hidden, heads, ffn, eps, theta)``: one Llama-style decoder layer behind a fusion
  ``fc(cat(f_j, e_{j+1}))`` of the target feature f_j at position j and the embedding of token
  x_{j+1}; its output is the predicted feature f_{j+1}, read out by the target's own (frozen) LM
  head. ``forward(f, e)`` is the training path, causal over a window [B, T, H]. The engine drafts
  through ``decode.EagleDecoder`` (the same function in fewer ops; tests check it against a
  reference built from this module). ``load(folder)`` reads the shared head format.
- ``KV(heads, head_dim, capacity, dtype, device)``: preallocated keys/values [heads, capacity,
  head_dim] of the layer with ``length`` slots in use; ``ensure(n)`` grows it.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from specdec.models.cache import grow
from specdec.models.lean import inv_freq, rope_table
from specdec.proposers.folder import load_state, read_config


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding of x [..., T, d] at integer positions pos [T] (the Llama convention)."""
    d = x.shape[-1]
    cos, sin = rope_table(inv_freq(d, theta, x.device), int(pos.max()) + 1)
    cos, sin = cos[pos].to(x.dtype), sin[pos].to(x.dtype)
    half = d // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


class KV:
    def __init__(self, heads: int, head_dim: int, capacity: int, dtype: torch.dtype, device) -> None:
        self.k = torch.zeros(heads, capacity, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)
        self.length = 0

    def ensure(self, n: int) -> None:
        self.k, self.v = grow(self.k, self.length, n, 1), grow(self.v, self.length, n, 1)


class EagleLayer(nn.Module):
    kind = "eagle"

    def __init__(self, hidden: int, heads: int, ffn: int, eps: float = 1e-6, theta: float = 10000.0) -> None:
        super().__init__()
        self.config = {"kind": self.kind, "hidden": hidden, "heads": heads, "ffn": ffn, "eps": eps, "theta": theta}
        self.heads, self.hd, self.eps, self.theta = heads, hidden // heads, eps, theta
        self.fc = nn.Linear(2 * hidden, hidden)
        self.ln1 = nn.Parameter(torch.ones(hidden))
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.ln2 = nn.Parameter(torch.ones(hidden))
        self.gate_up = nn.Linear(hidden, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def qkv_at(self, x: torch.Tensor, pos: torch.Tensor):
        """q, k, v [..., heads, T, hd] of inputs x [..., T, H] at positions ``pos``, rotated."""
        h = F.rms_norm(x, (x.shape[-1],), self.ln1, self.eps)
        q, k, v = self.qkv(h).unflatten(-1, (3, self.heads, self.hd)).unbind(-3)  # [..., T, heads, hd]
        q, k, v = (t.transpose(-3, -2) for t in (q, k, v))  # [..., heads, T, hd]
        return rope(q, pos, self.theta), rope(k, pos, self.theta), v

    def out(self, x: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        """The rest of the layer after attention: output projection, residual, MLP."""
        x = x + self.o(att.transpose(-3, -2).flatten(-2))
        g, u = self.gate_up(F.rms_norm(x, (x.shape[-1],), self.ln2, self.eps)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)

    def forward(self, f: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """Training: f, e [B, T, H] (f_j and the embedding of x_{j+1}) -> predicted f_{j+1} [B, T, H]."""
        x = self.fc(torch.cat([f, e], dim=-1))
        q, k, v = self.qkv_at(x, torch.arange(x.shape[-2], device=x.device))
        return self.out(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))

    @classmethod
    def load(cls, folder: Path, device="cpu", dtype: torch.dtype = torch.float32, target_model=None) -> EagleLayer:
        return load_state(cls(**read_config(folder, target_model, cls.kind)), folder, device, dtype)
