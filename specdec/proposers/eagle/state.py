"""One request's EAGLE state, apart from the weights every request drafts with.

Why: the trained layer, the target's embedding and LM head, the tree's settings and calibration's
choices serve every request; what follows one request is the layer's KV over the pairs of its
committed text, the tokens that KV holds, and auto k's measurements (``fallback.PlainFallback``).
The solo proposer (``proposer.Eagle``) holds one ``EagleState`` (``Eagle.state``) and the batch's
form (``batch.BatchEagle``) one per row, and both draft through the same ``BatchEagle.propose``
(before, a batch row copied the whole proposer and patched its cache in and out).

Contract: ``EagleState(kv=None)``: ``kv``, the layer's keys and values (``layer.KV`` of its own
for the solo request, a ``batch.SlotKV`` over a batch slot's views for a row, None while a row has
no slot yet); ``slot``, that batch slot (None solo); ``ids``, the tokens whose pairs fill kv slots
``[0, len(ids) - 1)``, resynchronised by longest common prefix on every call; ``fallback`` and
``chose_plain`` (``fallback.TreeState``); ``forget()`` makes the next call feed every pair again.
"""

from __future__ import annotations

from specdec.proposers.fallback import TreeState


class EagleState(TreeState):
    def __init__(self, kv=None) -> None:
        super().__init__()
        self.kv = kv
        self.slot: int | None = None
        self.ids: list[int] = []

    def forget(self) -> None:
        """Nothing cached: the next call feeds every pair (the KV is resynchronised from ``ids``)."""
        self.ids = []
        if self.kv is not None:
            self.kv.length = 0
