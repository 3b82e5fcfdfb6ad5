"""Medusa's one proposal for many requests: every Medusa row's tree from one batched heads call.

Why: Medusa's heads read the target's hidden state, so they keep no cache; what follows a request
is only auto k's measurements (``fallback.PlainFallback``). The solo proposer (``proposer.Medusa``)
and the batch's rows therefore hold a ``MedusaState`` each and draft through the same
``BatchMedusa.propose``, the solo request as the batch of one.

Contract:
- ``MedusaState()``: one request's ``fallback`` and ``chose_plain`` (``fallback.TreeState``).
- ``medusa_propose(medusa, pairs)``: ``pairs`` (n nodes, hidden [H]) per row, n >= 1: Medusa's heads
  over all rows at once (one block and one projection per head over the rows' stacked hidden
  states), each row's tree cut to its n nodes as solo.
- ``BatchMedusa(medusa)``: ``new_state()``, ``propose(states, contexts) -> list[Draft]``: per state,
  auto k's plain fallback, then the budget (a row with no room or no hidden state yet gets an
  empty draft); one state left to draft runs ``Medusa.tree``, the single-request computation (the
  solo request's ``Medusa.propose`` is ``propose([medusa.state], [ctx])``); more run
  ``medusa_propose``. ``release(state)``, ``nbytes()`` (0) and ``catch_up_ms`` (0: nothing to
  catch up) complete the batch form's interface (``core/methods.py``).
Exactness: the draft is deterministic (q = None); batched kernels may round differently from solo
and so, on a near-tie, change a row's tree, never its greedy tokens (docs/batching.md).
"""

from __future__ import annotations

import torch

from specdec.core.tree import Draft
from specdec.proposers.fallback import TreeState


class MedusaState(TreeState):
    """One request's Medusa state: auto k's fallback alone (the heads keep no cache)."""


@torch.inference_mode()
def medusa_propose(medusa, pairs: list) -> list[Draft]:
    """``pairs``: (n nodes, hidden [H]) per row, n >= 1; Medusa's tree per row, heads batched."""
    w = medusa.heads.projections[0].weight
    h = torch.stack([hid.to(device=w.device, dtype=w.dtype) for _, hid in pairs])  # [R, H]
    deepest = max(int(medusa.depth[:n].max()) + 1 for n, _ in pairs)
    top = medusa.top_tokens(h, deepest)  # [R, K, top]
    out = []
    for (n, _), t in zip(pairs, top):
        out.append(Draft(t[medusa.depth[:n], medusa.rank[:n]], tuple(medusa.parents[:n])))
    return out


class BatchMedusa:
    catch_up_ms = 0.0  # the heads read the target's hidden state: nothing to catch up

    def __init__(self, medusa) -> None:
        self.medusa = medusa

    def new_state(self) -> MedusaState:
        return MedusaState()

    def release(self, state: MedusaState) -> None:
        pass

    def nbytes(self) -> int:
        return 0

    @torch.inference_mode()
    def propose(self, states: list[MedusaState], contexts: list) -> list[Draft]:
        m = self.medusa
        drafts: list[Draft] = [Draft.empty()] * len(states)
        todo = []
        for i, (state, ctx) in enumerate(zip(states, contexts)):
            if state.fallback.plain(ctx):
                continue
            n = min(m.n_nodes, ctx.budget, ctx.k_max or m.n_nodes)
            if n > 0 and ctx.hidden is not None and len(ctx.hidden) > 0:  # a one-token prompt has none yet
                todo.append((i, n, ctx))
        if len(todo) == 1:  # the single-request computation
            i, _, ctx = todo[0]
            drafts[i] = m.tree(ctx)
        elif todo:
            for (i, _, _), d in zip(todo, medusa_propose(m, [(n, ctx.hidden[-1]) for _, n, ctx in todo])):
                drafts[i] = d
        for i, _, _ in todo:
            states[i].fallback.drafted(drafts[i].n)
        return drafts
