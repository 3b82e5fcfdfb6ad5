"""The draft model's transformers forward with a ``cache.py`` cache (any causal LM).

Contract: ``HFRunner(model, capacity)``: ``length``, ``state``/``fresh``/``restore`` (the keep-warm
policy and ``DraftModel.chain`` swap whole caches), ``truncate(n)``, ``forward(tokens) -> logits
after the last token``. Apart from draft.py so the 4-bit runner (``draft_quant.py``) reuses the
cache handling without an import cycle.
"""

from __future__ import annotations

import torch

from specdec.models import cache as kv


class HFRunner:
    """The draft through its own transformers forward and a ``cache.py`` cache (any causal LM)."""

    def __init__(self, model: torch.nn.Module, capacity: int) -> None:
        self.decoder = model.get_decoder()
        self.lm_head = model.get_output_embeddings()
        self.device = next(model.parameters()).device
        self.n_layers, self.capacity = model.config.num_hidden_layers, capacity
        self.cache = kv.new_cache(self.n_layers, capacity)

    @property
    def length(self) -> int:
        return kv.length(self.cache)

    def state(self):
        return self.cache

    def fresh(self):
        return kv.new_cache(self.n_layers, self.capacity)

    def restore(self, state) -> None:
        self.cache = state

    def truncate(self, n: int) -> None:
        kv.truncate(self.cache, n)

    def forward(self, tokens: list[int]) -> torch.Tensor:
        L = self.length
        x = torch.tensor([tokens], dtype=torch.long, device=self.device)
        pos = torch.arange(L, L + len(tokens), device=self.device).view(1, -1)
        h = self.decoder(input_ids=x, position_ids=pos, cache=self.cache, use_cache=True).last_hidden_state
        return self.lm_head(h[0, -1])
