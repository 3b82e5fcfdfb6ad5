"""The proposer interface: ``propose(ctx) -> Draft``, nothing else.

Contract: a proposer sees the committed tokens (the last one is pending, not yet in the target's
cache), the sampling parameters, a node budget and the target's hidden states from the last step.
It returns a ``Draft`` of at most ``ctx.budget`` nodes whose ``q`` is exactly the distribution
its tokens were sampled from after ``to_probs`` with the same parameters (invariant I3), or None
for a deterministic draft. Proposers keep their own state (caches, acceptance estimates) as
functions of the committed tokens, resynchronising by longest common prefix on every call: the
engine never calls commit or rollback on them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from ..config import SamplingParams
from ..tree import Draft


@dataclass
class Context:
    tokens: list[int]
    params: SamplingParams
    budget: int
    generator: torch.Generator | None = None
    hidden: torch.Tensor | None = None
    target_ms: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def pending(self) -> int:
        return self.tokens[-1]


class Proposer(Protocol):
    name: str

    def propose(self, ctx: Context) -> Draft: ...


class NoDraft:
    """The baseline: an empty draft makes every step a plain decoding step (invariant I2)."""

    name = "none"

    def propose(self, ctx: Context) -> Draft:
        return Draft.empty()
