"""The draft model on 4-bit weights: the target's lean forward (``models/lean_target.py``) as a
draft runner, so a draft from a GGUF (Qwen2.5-Coder-0.5B beside the 1.5B) runs on the same native
kernels as its target.

Why: a draft pays only when its step costs a small part of the target's (c in the speedup
(1 - alpha^(k+1)) / ((1 - alpha)(k c + 1))). With the target on 4-bit blocks and the draft in
bfloat16 or float32 through transformers, c is above 1 and speculation can only lose. The draft's
exactness needs no row-exactness: q is whatever distribution its tokens were sampled from (I3),
and every forward of this runner is a deterministic function of the tokens fed.

Contract: ``QuantRunner(model, capacity, fmt)`` has ``draft_runner.HFRunner``'s interface (``length``,
``state``/``fresh``/``restore``, ``truncate``, ``forward(tokens) -> logits after the last``), its
layers in ``fmt`` (``quant.FORMATS``, one of ``lean_target.ROW_EXACT``), its LM head in
``quant.HEAD[fmt]``; ``set_vocab(ids)`` reads that head on the rows ``ids`` only (a reduced
draft vocabulary, FR-Spec: ``vocab_subset.py``; logits are ``-inf`` elsewhere, so q is zero
there and the verifier stays exact), ``set_vocab(None)`` on every row. A feed of at most
``NATIVE_ROWS`` tokens (every draft step, and the accepted tokens it re-feeds) runs the native
loops (``kernels/rows.cpp``) where they are built (float32 models, ``SPECDEC_NATIVE`` not 0);
longer feeds (a prompt) run the batched lean layers.
Why: until 2026-12-06 every feed ran the lean layers, whose per-op dispatch over 24 layers made a
one-token step of Qwen2.5-Coder-0.5B cost about half a 1.5B target step (the measured crossover
is in docs/log/memwall.md). ``formats(model)``: the formats it can take for this model here
("fp32" excluded).
"""

from __future__ import annotations

import torch

from specdec.models import quant as Q
from specdec.models.forward import SHORT_ROWS, Forward, kernel
from specdec.models.lean_target import ROW_EXACT, LeanTarget, supports_quantized
from specdec.proposers.draft_runner import HFRunner

NATIVE_ROWS = SHORT_ROWS  # the longest feed the native loops take (models/forward.py decides)


def formats(model: torch.nn.Module) -> tuple[str, ...]:
    w = model.get_output_embeddings().weight
    if w.device.type != "cpu" or w.dtype != torch.float32 or not supports_quantized(model):
        return ()
    down = model.get_decoder().layers[0].mlp.down_proj.weight
    return tuple(f for f in ROW_EXACT if Q.available(f, down))


class QuantRunner(HFRunner):
    """``HFRunner``'s cache handling; the forward is the lean one on ``fmt`` weights."""

    def __init__(self, model: torch.nn.Module, capacity: int, fmt: str) -> None:
        if fmt not in formats(model):
            raise ValueError(f"draft weight format {fmt!r} not available here: {formats(model)}")
        super().__init__(model, capacity)
        self.fmt = fmt
        self.lean = LeanTarget(model, fmt=fmt)
        self.head = Q.quantize(model.get_output_embeddings().weight, Q.HEAD.get(fmt, fmt))
        self.vocab_ids: torch.Tensor | None = None
        self._sub = None  # the head on vocab_ids' rows

    def set_vocab(self, ids: torch.Tensor | None) -> None:
        """Draft from the token ids ``ids`` only (ascending, distinct); None: the whole vocabulary."""
        weight = self.lm_head.weight  # the float head the quantized copies are made from
        if ids is not None and (len(ids) == 0 or int(ids.max()) >= weight.shape[0] or int(ids.min()) < 0):
            raise ValueError(f"draft vocabulary ids must lie in [0, {weight.shape[0]}) and not be empty")
        self.vocab_ids, self._sub = ids, None
        if ids is not None:  # rows padded with zeros to the kernels' tile of 16 (their logits are cut off)
            rows = torch.cat([weight[ids], weight.new_zeros((-len(ids)) % 16, weight.shape[1])])
            self._sub = Q.quantize(rows.contiguous(), Q.HEAD.get(self.fmt, self.fmt))

    def kind(self, rows: int) -> str:
        """The forward a feed of ``rows`` tokens runs, as ``forward.kernel`` decides for a draft:
        "native" where built and the feed is short enough, else "lean"."""
        native = "native" if "native" in self.lean.rows() else ""
        return kernel(Forward("lean", self.fmt, native, whole=False), rows, False, True)

    @torch.inference_mode()
    def forward(self, tokens: list[int]) -> torch.Tensor:
        L = self.length
        ids = torch.tensor(tokens, dtype=torch.long)
        pos = torch.arange(L, L + len(tokens)).view(1, -1)
        h = self.lean.hidden(self.cache, ids, pos, None, self.kind(len(tokens)))
        if self._sub is None:
            return self.head(h[-1:])[0]
        out = torch.full((self.lm_head.weight.shape[0],), float("-inf"), dtype=h.dtype)
        out[self.vocab_ids] = self._sub(h[-1:])[0, : len(self.vocab_ids)].to(h.dtype)
        return out
