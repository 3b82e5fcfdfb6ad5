"""The two draft-head architectures, in plain torch, and their folder format.

Contract
--------
- ``MedusaHeads(hidden, vocab, n_heads)``: head k (k = 1..n_heads) maps the target's last hidden
  state h_t (the LM head's input at the position whose output is the pending token x_{t+1}) to
  logits for token x_{t+1+k}: ``W_k (h + SiLU(A_k h + b_k))``, a residual SiLU block and a
  projection to the vocabulary (Cai et al., 2024). ``forward(h) -> [..., n_heads, V]``.
- ``EagleLayer(hidden, heads, ffn, eps)``: one Llama-style decoder layer behind a fusion
  ``fc(cat(f_j, e_{j+1}))`` of the target feature f_j at position j and the embedding of token
  x_{j+1}; its output is the predicted feature f_{j+1}, read out by the target's own (frozen) LM
  head (Li et al., 2024). ``forward(f, e)`` is the training path (causal over a window);
  ``attend(f, e, pos, kv, mask)`` the reference decoding path (writes keys/values into ``kv``
  slots); the engine drafts through ``eagle_decode.EagleDecoder``, tested equal to it.
- ``save_heads(module, folder, card)`` / ``load_heads(folder, device, dtype)``: fp16 safetensors
  ``model.safetensors``, ``config.json`` (kind + shape), ``card.json`` and ``README.md``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


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
        """Logits of every head, stacked on dim -2 (training; decoding runs the same math through
        ``packed.Linear`` in ``proposers/medusa.py``, only for the heads its tree reaches)."""
        return torch.stack([p(h + F.silu(b(h))) for b, p in zip(self.block, self.proj)], dim=-2)


def rope_table(d: int, theta: float, n: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [n, d] of the rotary embedding at positions 0..n-1 (the Llama convention)."""
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
    ang = torch.arange(n, device=device, dtype=torch.float32)[:, None] * inv[None]
    return torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding of x [..., T, d] at integer positions pos [T] (the Llama convention)."""
    d = x.shape[-1]
    cos, sin = rope_table(d, theta, int(pos.max()) + 1, x.device)
    cos, sin = cos[pos].to(x.dtype), sin[pos].to(x.dtype)
    half = d // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


class KV:
    """Preallocated keys/values [heads, capacity, head_dim] of one EagleLayer; ``length`` slots used."""

    def __init__(self, heads: int, head_dim: int, capacity: int, dtype: torch.dtype, device) -> None:
        self.k = torch.zeros(heads, capacity, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)
        self.length = 0

    def ensure(self, n: int) -> None:
        if n > self.k.shape[1]:
            cap = max(n, 2 * self.k.shape[1])
            k, v = self.k.new_zeros(self.k.shape[0], cap, self.k.shape[2]), self.v.new_zeros(self.k.shape[0], cap, self.k.shape[2])
            k[:, : self.k.shape[1]], v[:, : self.v.shape[1]] = self.k, self.v
            self.k, self.v = k, v


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

    def _qkv(self, x: torch.Tensor, pos: torch.Tensor):
        h = F.rms_norm(x, (x.shape[-1],), self.ln1, self.eps)
        q, k, v = self.qkv(h).unflatten(-1, (3, self.heads, self.hd)).unbind(-3)  # [..., T, heads, hd]
        q, k, v = (t.transpose(-3, -2) for t in (q, k, v))  # [..., heads, T, hd]
        return rope(q, pos, self.theta), rope(k, pos, self.theta), v

    def _out(self, x: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        x = x + self.o(att.transpose(-3, -2).flatten(-2))
        g, u = self.gate_up(F.rms_norm(x, (x.shape[-1],), self.ln2, self.eps)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)

    def forward(self, f: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """Training: f, e [B, T, H] (f_j and the embedding of x_{j+1}) -> predicted f_{j+1} [B, T, H]."""
        x = self.fc(torch.cat([f, e], dim=-1))
        q, k, v = self._qkv(x, torch.arange(x.shape[-2], device=x.device))
        return self._out(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))

    def attend(self, f: torch.Tensor, e: torch.Tensor, pos: torch.Tensor, kv: KV, mask: torch.Tensor | None) -> torch.Tensor:
        """Decoding: n new inputs [n, H] at positions ``pos`` [n] written to slots kv.length..+n;
        ``mask`` [n, kv.length + n] bool (True = visible) or None for causal. Advances kv.length."""
        x = self.fc(torch.cat([f, e], dim=-1))
        q, k, v = self._qkv(x, pos)
        n, L = x.shape[0], kv.length
        kv.ensure(L + n)
        kv.k[:, L:L + n], kv.v[:, L:L + n] = k, v
        if mask is None and n > 1:
            mask = torch.ones(n, L + n, dtype=torch.bool, device=x.device).tril(diagonal=L)
        att = F.scaled_dot_product_attention(q, kv.k[:, :L + n], kv.v[:, :L + n], attn_mask=mask)
        kv.length = L + n
        return self._out(x, att)

    def new_kv(self, capacity: int) -> KV:
        w = self.qkv.weight
        return KV(self.heads, self.hd, capacity, w.dtype, w.device)


KINDS = {"medusa": MedusaHeads, "eagle": EagleLayer}


def save_heads(module: nn.Module, folder: Path, card: dict) -> None:
    from safetensors.torch import save_file
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in module.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(module.config, indent=2) + "\n")
    (folder / "card.json").write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")
    lines = [f"# {card.get('name', folder.name)}", "", card.get("description", ""), ""]
    for k, v in sorted(card.items()):
        if k in ("name", "description"):
            continue
        lines.append(f"- {k}: {json.dumps(v) if not isinstance(v, float) else f'{v:.4f}'}")
    (folder / "README.md").write_text("\n".join(lines) + "\n")
    for p in folder.iterdir():
        os.chmod(p, 0o644)


def load_heads(folder: Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> nn.Module:
    from safetensors.torch import load_file
    cfg = json.loads((folder / "config.json").read_text())
    kind = cfg.pop("kind")
    if kind not in KINDS:
        raise ValueError(f"{folder}/config.json: unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    module = KINDS[kind](**cfg)
    module.load_state_dict({k: v.to(dtype) for k, v in load_file(str(folder / "model.safetensors")).items()})
    return module.to(device=device, dtype=dtype).eval()


def param_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


__all__ = ["MedusaHeads", "EagleLayer", "KV", "save_heads", "load_heads", "rope", "rope_table", "param_count"]
