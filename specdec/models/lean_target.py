"""The target's lean forward: a plain Llama decoder run as ``lean.FusedLayer`` bodies, no modules.

Why: the shipped target is small, so a transformers forward spends about as long in Python module
dispatch, config lookups, mask building and per-layer RoPE as in its matmuls (docs/bench.md has the
figures). Running the same weights through the fused layer body the lean draft and EAGLE use cuts
the plain step, which every method pays once per step. Calibration (``specdec/fast/calibrate.py``) times
it against transformers' forward on the running machine and keeps the faster.

Contract:
- ``LeanTarget.supports(model)`` is ``LeanLlama.supports`` (plain Llama: no biases, default RoPE,
  SiLU); anything else keeps transformers' forward. ``supports_quantized(model)`` also takes
  Qwen2 (q/k/v biases, no sliding window): ``LeanTarget(model, fmt=...)`` with ``fmt`` one of
  ``quant.FORMATS`` other than fp32 runs the weights in that format (``FusedLayer.quantized``).
  ``row_exact`` (int8 and int4): every forward of one token, and every forward with ``exact=True``
  (the verifier's), attends row by row, so each row of a k-row forward is bit for bit the
  one-row forward of plain decoding; prefill keeps one batched call. Three forwards compute those
  rows (``rows()``: the ones built here): "eager" (``rowexact.attend_rows``), "script" (one
  TorchScript function for a chain, ``scripted.ScriptedLayers``: the same calls, the same floats;
  built where it applies) and, on int4 and q4_1, "native" (``native.NativeLayers``, compiled loops
  around the same matmuls, its own arithmetic, chains and trees; built where the kernels built).
  Which one runs is not decided here: the caller passes ``kind``, what ``forward.kernel`` chose
  from the target's ``Forward`` (calibration times them and keeps the fastest).
- ``hidden(cache, ids, positions, mask, kind)`` is what ``model.get_decoder()(...).last_hidden_state[0]``
  returns for the same arguments, to float tolerance: ``ids`` [T] long, ``positions`` [T] long
  (any order: tree nodes share depths), ``mask`` None (causal among the T tokens) or the additive
  tree mask [1, 1, T, L + T] of ``tree.tree_attention_mask``. Keys and values are written into
  the same ``cache`` (``specdec/models/cache.py``'s growing layers) at slots [L, L + T), so truncation,
  ``keep`` and prefix reuse work unchanged whichever forward wrote them.
Exactness: the verifier compares tokens, so a rounding difference could only matter at an exact
argmax tie; tests check the greedy tokens against transformers' ``generate`` on the shipped prompts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specdec.models import cache as kv
from specdec.models.forward import ROWS
from specdec.models.lean import FusedLayer, LeanLlama, causal_mask, dims, rope_table
from specdec.models.native import NativeLayers
from specdec.models.rowexact import attend_rows, visible_rows
from specdec.models.scripted import ScriptedLayers

ROW_EXACT = ("int8", "int4", "q4_1")  # formats whose linears are row-invariant (quant.row_invariant)


def supports_quantized(model: torch.nn.Module) -> bool:
    """Llama, or Qwen2 without a sliding window: the lean body with q/k/v biases."""
    cfg = model.config
    if getattr(cfg, "model_type", "") == "qwen2":
        rope = getattr(cfg, "rope_scaling", None) or getattr(cfg, "rope_parameters", None) or {}
        rope_type = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
        return not getattr(cfg, "use_sliding_window", False) and rope_type == "default"
    return LeanLlama.supports(model)


class LeanTarget:
    supports = staticmethod(LeanLlama.supports)

    @torch.inference_mode()
    def __init__(self, model: torch.nn.Module, fold_rope: bool = False, fmt: str = "fp32") -> None:
        m = model.get_decoder()
        self.n_heads, self.n_kv, self.head_dim, self.eps = dims(model.config)
        self.embed = m.embed_tokens.weight
        self.norm = m.norm.weight
        self.fmt, self.row_exact = fmt, fmt in ROW_EXACT
        H, KV, eps = self.n_heads, self.n_kv, self.eps
        if fmt == "fp32":
            self.layers = [FusedLayer.of(layer, H, KV, eps, fold_rope) for layer in m.layers]
        else:
            self.layers = [FusedLayer.quantized(layer, H, KV, eps, fmt) for layer in m.layers]
        script = ScriptedLayers.of(self.layers) if self.row_exact else None
        native = fmt in ("int4", "q4_1") and self.embed.dtype == torch.float32  # rows.cpp: float32 caches
        native = NativeLayers.of(self.layers) if native else None
        self._rows = {"native": native, "script": script}  # the compiled row-exact forwards built here
        rot = m.rotary_emb
        self.inv_freq = rot.inv_freq.float()
        self.rope_scale = float(getattr(rot, "attention_scaling", 1.0))
        self.dtype = self.embed.dtype
        self.cos = self.sin = self.embed.new_empty((0, 0))

    def native(self):
        """The native layers built here (``native.NativeLayers``), or None."""
        return self._rows["native"]

    def rows(self) -> tuple[str, ...]:
        """The row-exact forwards this target can run, in ``forward.ROWS`` order; () off a row-exact format."""
        if not self.row_exact:
            return ()
        return tuple(r for r in ROWS if r == "eager" or self._rows[r] is not None)

    def _table(self, need: int) -> None:
        if need > self.cos.shape[0]:
            n = max(need, 2 * self.cos.shape[0], 256)
            self.cos, self.sin = rope_table(self.inv_freq, n, self.n_heads + self.n_kv, self.rope_scale, self.dtype)

    @torch.inference_mode()
    def hidden(
        self, cache, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None, kind: str = "lean"
    ) -> torch.Tensor:
        """``kind``: "lean" (the fused layers over all T rows at once) or a row-exact forward of ``rows()``."""
        T, L = ids.shape[0], kv.length(cache)
        pos = positions.view(-1)
        self._table(L + T if mask is None else int(pos.max()) + 1)
        if mask is None:  # a chain or a prefill: positions L .. L + T - 1
            cos, sin = self.cos[L : L + T], self.sin[L : L + T]
            att = causal_mask(T, L, ids.device)
        else:
            cos, sin = self.cos[pos], self.sin[pos]
            att = mask[0, 0]
        x = self.embed[ids]
        bufs = kv.reserve(cache, L + T, self.n_kv, self.head_dim, x)
        if kind == "native":
            x = self._rows["native"].rows(x, cos, sin, bufs, L, None if mask is None else visible_rows(mask, L))
        elif kind == "script":
            x = self._rows["script"].chain(x, cos, sin, bufs, L)
        elif kind == "eager":
            seen = None if mask is None else visible_rows(mask, L)
            for layer, (k, v) in zip(self.layers, bufs):
                x = attend_rows(layer, x, cos, sin, k, v, L, seen)
        else:
            for layer, (k, v) in zip(self.layers, bufs):
                x = layer(x, cos, sin, k, v, L, att)
        kv.advance(cache, T)
        if kind == "native":
            return self._rows["native"].norm(x, self.norm)
        return F.rms_norm(x, (x.shape[-1],), self.norm, self.eps)
