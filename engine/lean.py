"""A lean decode path for small Llama-architecture drafts, where framework overhead dominates.

Why: a 1M-parameter draft spends ~80% of an HF forward in Python module dispatch, config lookups
and mask building (profiled on this CPU: 0.86 ms per token, of which 0.17 ms in matmuls). The
draft's cost ratio c enters the speedup as (k c + 1), so the draft step must be cheap. This module
runs the same weights and the same math as transformers' ``LlamaForCausalLM`` (RMSNorm, rotary
embeddings, grouped-query attention, SiLU-gated MLP, tied or untied head) with fused QKV and
gate/up projections, a preallocated KV buffer and (on the CPU) oneDNN linears with pre-packed
weights (``packed.py``), in about a dozen tensor ops per layer.

Contract: ``LeanLlama.supports(model)`` says whether a model can take this path (plain Llama:
no attention/MLP bias, default RoPE, SiLU); ``forward(tokens)`` appends the tokens at the current
length and returns the logits after the last one; ``truncate(n)`` keeps the first n positions.
Exactness never depends on this module: the verifier uses whatever q the draft sampled from; a
test checks that its logits match transformers' to float tolerance.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import packed as P


class LeanLlama:
    @staticmethod
    def supports(model: torch.nn.Module) -> bool:
        cfg = model.config
        rope = getattr(cfg, "rope_scaling", None) or getattr(cfg, "rope_parameters", None) or {}
        rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
        return (getattr(cfg, "model_type", "") == "llama" and not getattr(cfg, "attention_bias", False)
                and not getattr(cfg, "mlp_bias", False) and getattr(cfg, "hidden_act", "silu") == "silu"
                and rope_type == "default")

    @torch.inference_mode()
    def __init__(self, model: torch.nn.Module, capacity: int = 1024) -> None:
        cfg, m = model.config, model.get_decoder()
        self.n_heads = cfg.num_attention_heads
        self.n_kv = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads
        self.eps = cfg.rms_norm_eps
        self.embed = m.embed_tokens.weight
        self.layers = []
        for layer in m.layers:
            a, mlp = layer.self_attn, layer.mlp
            self.layers.append((
                layer.input_layernorm.weight,
                torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]),
                a.o_proj.weight,
                layer.post_attention_layernorm.weight,
                torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]),
                mlp.down_proj.weight,
            ))
        self.norm = m.norm.weight
        self.head = model.get_output_embeddings().weight
        if P.available(self.head):  # oneDNN with pre-packed weights (packed.py): cheaper small matmuls
            self.layers = [(ln1, P.pack_weight(wqkv), P.pack_weight(wo), ln2, P.pack_weight(wgu), P.pack_weight(wd))
                           for ln1, wqkv, wo, ln2, wgu, wd in self.layers]
            self.head = P.pack_weight(self.head)
            self._lin = P.linear
        else:
            self._lin = F.linear
        rot = m.rotary_emb
        self.inv_freq = rot.inv_freq.float()
        self.rope_scale = float(getattr(rot, "attention_scaling", 1.0))
        self.dtype, self.device = self.embed.dtype, self.embed.device
        self.capacity = 0
        self.length = 0
        self._alloc(capacity)

    def _alloc(self, capacity: int) -> None:
        shape = (len(self.layers), self.n_kv, capacity, self.head_dim)
        k = torch.empty(shape, dtype=self.dtype, device=self.device)
        v = torch.empty(shape, dtype=self.dtype, device=self.device)
        if self.capacity:
            k[:, :, : self.length] = self.k[:, :, : self.length]
            v[:, :, : self.length] = self.v[:, :, : self.length]
        self.k, self.v = k, v
        pos = torch.arange(capacity, dtype=torch.float32, device=self.device)
        freqs = torch.outer(pos, self.inv_freq.to(self.device))
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos = (emb.cos() * self.rope_scale).to(self.dtype)
        self.sin = (emb.sin() * self.rope_scale).to(self.dtype)
        self.capacity = capacity

    def truncate(self, n: int) -> None:
        self.length = max(0, min(n, self.length))

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    @torch.inference_mode()
    def forward(self, tokens: list[int]) -> torch.Tensor:
        T, L0 = len(tokens), self.length
        if L0 + T > self.capacity:
            self._alloc(max(2 * self.capacity, L0 + T))
        L1 = L0 + T
        x = self.embed[torch.tensor(tokens, device=self.device)]
        cos, sin = self.cos[L0:L1], self.sin[L0:L1]
        mask = None
        if T > 1:  # causal within the new tokens, full view of the cached prefix
            mask = torch.ones(T, L1, dtype=torch.bool, device=self.device).tril(diagonal=L0)
        H, KV, hd = self.n_heads, self.n_kv, self.head_dim
        for i, (ln1, wqkv, wo, ln2, wgu, wd) in enumerate(self.layers):
            h = F.rms_norm(x, (x.shape[-1],), ln1, self.eps)
            q, k, v = self._lin(h, wqkv).split([H * hd, KV * hd, KV * hd], dim=-1)
            q = self._rotate(q.view(T, H, hd).transpose(0, 1), cos, sin)
            self.k[i, :, L0:L1] = self._rotate(k.view(T, KV, hd).transpose(0, 1), cos, sin)
            self.v[i, :, L0:L1] = v.view(T, KV, hd).transpose(0, 1)
            att = F.scaled_dot_product_attention(q, self.k[i, :, :L1], self.v[i, :, :L1], attn_mask=mask,
                                                 enable_gqa=KV != H)
            x = x + self._lin(att.transpose(0, 1).reshape(T, H * hd), wo)
            g, u = self._lin(F.rms_norm(x, (x.shape[-1],), ln2, self.eps), wgu).chunk(2, dim=-1)
            x = x + self._lin(F.silu(g) * u, wd)
        self.length = L1
        return self._lin(F.rms_norm(x[-1], (x.shape[-1],), self.norm, self.eps), self.head)
