"""Lean decoding forwards for Llama-style layers, where framework overhead dominates the cost.

Why: a small model spends most of a transformers forward in Python module dispatch, config lookups
and mask building, not in matmuls; a draft's cost ratio c enters the speedup as (k c + 1), so its
step must be cheap (docs/bench.md has the measured figures). One ``FusedLayer`` body serves both
the lean draft (``LeanLlama``, every layer of a plain Llama) and EAGLE's draft layer
(``proposers/eagle/decode.py``), in about a dozen tensor ops:
- one QKV linear whose weight also holds rotate_half(Wq) and rotate_half(Wk), so RoPE is a
  multiply and an ``addcmul`` against a per-position table (``rope_table``); one gate/up linear;
- RMSNorm weights folded into the columns of the linear after each norm;
- 4-D inputs to ``scaled_dot_product_attention`` (the CPU flash kernel; 3-D takes the math path);
- keys and values written into caller-owned preallocated buffers;
- each linear through ``packed.Linear``, which picks its path per weight.

Contract:
- ``inv_freq(head_dim, theta)`` and ``rope_table(inv_freq, n, reps, scale)``: the one rotary
  table of the project (Llama convention, cos/sin of cat(freqs, freqs)), tiled ``reps`` times.
- ``FusedLayer(wq, wk, wv, wo, w_gate, w_up, w_down, ln1, ln2, n_heads, n_kv, eps, fold_rope)``
  (``FusedLayer.of(layer, ...)`` from a transformers decoder layer);
  ``fold_rope=False`` keeps the QKV weight at its own size and rotates on the fly (the target's
  choice: a memory-bound step pays per weight byte, calibration times both);
  ``layer(x, cos, sin, k, v, start, mask)``: x [T, H] at the positions whose tables are cos/sin
  [T, (n_heads + n_kv) hd]; keys/values go to ``k[:, start:start+T]``, ``v[...]`` ([n_kv, cap, hd]);
  attention covers slots [0, start + T) under ``mask`` (bool [T, start + T], None = all visible).
  ``rotary(y, cos, sin)`` and ``finish(x, att)`` are the layer's two halves around attention, for
  forwards that attend their own way (the batch's ragged rows, ``models/lean_rows.py``).
- ``dims(cfg) -> (n_heads, n_kv, head_dim, eps)``: the attention and norm sizes of a Llama-style
  config, read in one place for the lean draft and the lean target.
- ``LeanLlama.supports(model)`` says whether a model can take this path (plain Llama: no
  attention/MLP bias, default RoPE, SiLU); ``forward(tokens)`` appends the tokens at the current
  length and returns the logits after the last one; ``truncate(n)`` keeps the first n positions.
Exactness never depends on this module: the verifier uses whatever q the draft sampled from; tests
check it against transformers and against EAGLE's training module to float tolerance.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specdec.models import packed as P
from specdec.models import quant as Q
from specdec.models.cache import grow


def inv_freq(head_dim: int, theta: float, device=None) -> torch.Tensor:
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))


def rope_table(
    inv: torch.Tensor, n: int, reps: int = 1, scale: float = 1.0, dtype=torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [n, reps * head_dim] at positions 0..n-1, one head's table tiled ``reps`` times."""
    freqs = torch.outer(torch.arange(n, dtype=torch.float32, device=inv.device), inv.float())
    emb = torch.cat([freqs, freqs], dim=-1).repeat(1, reps)
    return (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)


def rotate_rows(w: torch.Tensor, heads: int, hd: int) -> torch.Tensor:
    """Rows of W' with x W'^T == rotate_half(x W^T) per head (minus second half, first half):
    rotary embeddings then fold into the projection."""
    w = w.reshape(heads, hd, -1)
    return torch.cat([-w[:, hd // 2 :], w[:, : hd // 2]], dim=1).reshape(heads * hd, -1)


class FusedLayer:
    """One Llama decoder layer (pre-norm attention + SiLU-gated MLP) from its final weights."""

    @torch.no_grad()
    def __init__(
        self, wq, wk, wv, wo, w_gate, w_up, w_down, ln1, ln2, n_heads: int, n_kv: int, eps: float, fold_rope=True
    ) -> None:
        self.H, self.KV, self.hd, self.eps = n_heads, n_kv, wq.shape[0] // n_heads, eps
        hd, self.fold_rope = self.hd, fold_rope
        rot = [rotate_rows(wq, n_heads, hd), rotate_rows(wk, n_kv, hd)] if fold_rope else []
        self.qkv = P.Linear(torch.cat([wq, wk, *rot, wv]) * ln1)
        self.o = P.Linear(wo)
        self.gate_up = P.Linear(torch.cat([w_gate, w_up]) * ln2)
        self.down = P.Linear(w_down)

    @classmethod
    def of(cls, layer, n_heads: int, n_kv: int, eps: float, fold_rope: bool = True) -> FusedLayer:
        """The fused body of a transformers Llama-style decoder layer (``self_attn``, ``mlp``, norms)."""
        a, mlp = layer.self_attn, layer.mlp
        w = (a.q_proj, a.k_proj, a.v_proj, a.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj)
        ln = (layer.input_layernorm.weight, layer.post_attention_layernorm.weight)
        return cls(*(m.weight for m in w), *ln, n_heads, n_kv, eps, fold_rope)

    @classmethod
    @torch.no_grad()
    def quantized(cls, layer, n_heads: int, n_kv: int, eps: float, fmt: str) -> FusedLayer:
        """The same body on weights in ``fmt`` (``quant.py``): the norms' weights kept apart (folding
        them would break a GGUF's blocks), RoPE rotated on the fly, Qwen2's q/k/v biases added
        after the projection."""
        a, mlp = layer.self_attn, layer.mlp
        self = cls.__new__(cls)
        self.H, self.KV, self.hd, self.eps = n_heads, n_kv, a.q_proj.weight.shape[0] // n_heads, eps
        self.fold_rope = False
        proj = (a.q_proj, a.k_proj, a.v_proj)
        bias = torch.cat([m.bias for m in proj]) if all(m.bias is not None for m in proj) else None
        qkv = Q.quantize(torch.cat([m.weight for m in proj]), fmt, bias)
        self.qkv = Q.Scaled(qkv, layer.input_layernorm.weight)
        self.o = Q.quantize(a.o_proj.weight, fmt)
        gate_up = Q.quantize(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]), fmt)
        self.gate_up = Q.Scaled(gate_up, layer.post_attention_layernorm.weight)
        self.down = Q.quantize(mlp.down_proj.weight, fmt)
        return self

    def linears(self) -> tuple:
        return (self.qkv, self.o, self.gate_up, self.down)

    def rotary(self, y: torch.Tensor, cos, sin) -> tuple[torch.Tensor, torch.Tensor]:
        """(q|k rotated, v) from the fused projection's output y [T, ...] (cos/sin [T, (H + KV) hd])."""
        T, D = y.shape[0], (self.H + self.KV) * self.hd
        if self.fold_rope:
            return torch.addcmul(y[:, :D] * cos, y[:, D : 2 * D], sin), y[:, 2 * D :]  # rotary, fused
        # rotate_half on the fly: a smaller weight, for a step that streams it from memory
        h = y[:, :D].view(T, self.H + self.KV, 2, self.hd // 2)
        return torch.addcmul(y[:, :D] * cos, torch.cat([-h[:, :, 1], h[:, :, 0]], -1).view(T, D), sin), y[:, D:]

    def finish(self, x: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        """The layer's output from its input x and the attention ``att`` [T, H hd]: o, residual, MLP."""
        x = x + self.o(att)
        g, u = self.gate_up(F.rms_norm(x, (x.shape[-1],), None, self.eps)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)

    def __call__(self, x, cos, sin, k, v, start: int, mask) -> torch.Tensor:
        T, H, KV, hd = x.shape[0], self.H, self.KV, self.hd
        end = start + T
        qk, vv = self.rotary(self.qkv(F.rms_norm(x, (x.shape[-1],), None, self.eps)), cos, sin)
        k[:, start:end] = qk[:, H * hd :].view(T, KV, hd).transpose(0, 1)
        v[:, start:end] = vv.view(T, KV, hd).transpose(0, 1)
        q = qk[:, : H * hd].view(T, H, hd).transpose(0, 1)
        att = F.scaled_dot_product_attention(
            q[None], k[None, :, :end], v[None, :, :end], attn_mask=mask, enable_gqa=KV != H
        )
        return self.finish(x, att[0].transpose(0, 1).reshape(T, H * hd))


def dims(cfg) -> tuple[int, int, int, float]:
    """(n_heads, n_kv, head_dim, eps) of a Llama-style config (n_kv and head_dim may be unset)."""
    n_heads = cfg.num_attention_heads
    n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    return n_heads, n_kv, head_dim, cfg.rms_norm_eps


def causal_mask(T: int, start: int, device) -> torch.Tensor | None:
    """Causal within T new tokens, full view of ``start`` cached ones; None for one token."""
    if T == 1:
        return None
    return torch.ones(T, start + T, dtype=torch.bool, device=device).tril(diagonal=start)


class LeanLlama:
    @staticmethod
    def supports(model: torch.nn.Module) -> bool:
        cfg = model.config
        rope = getattr(cfg, "rope_scaling", None) or getattr(cfg, "rope_parameters", None) or {}
        rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
        return (
            getattr(cfg, "model_type", "") == "llama"
            and not getattr(cfg, "attention_bias", False)
            and not getattr(cfg, "mlp_bias", False)
            and getattr(cfg, "hidden_act", "silu") == "silu"
            and rope_type == "default"
        )

    @torch.inference_mode()
    def __init__(self, model: torch.nn.Module, capacity: int = 1024) -> None:
        m = model.get_decoder()
        self.n_heads, self.n_kv, self.head_dim, self.eps = dims(model.config)
        self.embed = m.embed_tokens.weight
        self.layers = [FusedLayer.of(layer, self.n_heads, self.n_kv, self.eps) for layer in m.layers]
        self.head = P.Linear(model.get_output_embeddings().weight * m.norm.weight)
        rot = m.rotary_emb
        self.inv_freq = rot.inv_freq.float().to(self.embed.device)
        self.rope_scale = float(getattr(rot, "attention_scaling", 1.0))
        self.dtype, self.device = self.embed.dtype, self.embed.device
        shape = (len(self.layers), self.n_kv, 0, self.head_dim)
        self.k = torch.empty(shape, dtype=self.dtype, device=self.device)
        self.v = torch.empty_like(self.k)
        self.length = 0
        self._ensure(capacity)

    @property
    def capacity(self) -> int:
        return self.k.shape[2]

    def _ensure(self, need: int) -> None:
        if need <= self.capacity:
            return
        self.k, self.v = grow(self.k, self.length, need, 2), grow(self.v, self.length, need, 2)
        reps = self.n_heads + self.n_kv  # one table row per q/k head
        self.cos, self.sin = rope_table(self.inv_freq, self.capacity, reps, self.rope_scale, self.dtype)

    def truncate(self, n: int) -> None:
        self.length = max(0, min(n, self.length))

    def state(self) -> tuple:
        """The cache, by reference (``prefixes.KeptStates``: kept per document)."""
        return (self.k, self.v, self.length)

    def fresh(self) -> tuple:
        """An empty cache of the same capacity (the live one is left as it is)."""
        return (torch.empty_like(self.k), torch.empty_like(self.v), 0)

    def restore(self, state: tuple) -> None:
        capacity = self.capacity
        self.k, self.v, self.length = state
        if self.capacity != capacity:  # the rotary tables follow the capacity
            reps = self.n_heads + self.n_kv
            self.cos, self.sin = rope_table(self.inv_freq, self.capacity, reps, self.rope_scale, self.dtype)

    @torch.inference_mode()
    def forward(self, tokens: list[int]) -> torch.Tensor:
        T, L0 = len(tokens), self.length
        self._ensure(L0 + T)
        x = self.embed[torch.tensor(tokens, device=self.device)]
        cos, sin = self.cos[L0 : L0 + T], self.sin[L0 : L0 + T]
        mask = causal_mask(T, L0, self.device)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, self.k[i], self.v[i], L0, mask)
        self.length = L0 + T
        return self.head(F.rms_norm(x[-1], (x.shape[-1],), None, self.eps))
