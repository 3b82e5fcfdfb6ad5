"""The draft model's one proposal for many requests: ``BatchDraft.propose(states, contexts)``.

Why: the draft model's weights serve every request, while each request keeps its own drafting
state (``draft_k.DraftState``: KV, acceptance tracker, step time, run of plain steps). The solo
proposer (``draft.DraftModel``) and the batch's draft rows draft through this one function, the
solo request as the batch of one, so a row chooses k, samples and times exactly as its solo run.

Contract: ``BatchDraft(proposer, slots, capacity)`` over ``proposer`` (the engine's ``DraftModel``:
weights, forwards, ``verify_cost``). ``new_state()`` is a row's ``DraftState``.
``propose(states, contexts)`` returns one ``Draft`` per state. For each state, ``begin`` gives k
(0: a plain step, no forward); then the drafting states draft k tokens with the confidence stop,
q = to_probs(logits, the request's parameters) and one sample per token from the request's own
generator, in the solo order, through one of two forwards:
- ``slots`` > 0 and a plain Llama draft (``ragged.RaggedLlama``, on the solo draft's lean weights,
  ``DraftModel.lean``, so the precision calibration chose applies to batch rows too): each state
  holds a slot of the ragged cache (``DraftState.slot``) from the first time it drafts until
  ``release(state)``; ONE ragged forward catches every row's cache up with its committed tokens
  (longest common prefix, as solo), then ONE forward per drafting position over the rows still
  drafting; ``draft_ms`` is the step's time per drafting forward, what each state's ``timed`` gets,
  and ``catch_up_ms`` the time of a long catch-up (a newcomer's prompt), left out of it;
- otherwise (the solo proposer's own form, ``slots`` = 0, or a draft the ragged forward does not
  take): one state after another through the draft's own forward, ``DraftModel.chain`` (the lean or
  transformers' runner and its cache: the single-request computation, with its timing); the batch
  then proposes each row apart (``one_by_one``), as solo.
Exactness: q and the tokens come from the same function as solo up to float rounding of batched
kernels (docs/batching.md); the verifier uses exactly the q each token was drawn from.
"""

from __future__ import annotations

import time

import torch

from specdec.core.sampling import sample, to_probs
from specdec.core.seq import common_prefix
from specdec.core.tree import Draft
from specdec.models.ragged import RaggedLlama
from specdec.proposers.draft_k import DraftState


class _Drafting:
    """One row's drafting in flight: its sampled tokens and q rows so far."""

    def __init__(self, state: DraftState, ctx, k: int, start: int, feed: list[int]) -> None:
        self.state, self.ctx, self.k, self.start, self.feed = state, ctx, k, start, feed
        self.xs: list[int] = []
        self.qs: list[torch.Tensor] = []
        self.done = False


class BatchDraft:
    def __init__(self, proposer, slots: int, capacity: int) -> None:
        self.proposer = proposer
        ragged = slots > 0 and RaggedLlama.supports(proposer.model)
        self.model = RaggedLlama(proposer.model, slots, capacity, proposer.lean) if ragged else None
        self.vocab = proposer.vocab
        self.free = list(range(slots - 1, -1, -1)) if ragged else []
        self.draft_ms: float | None = None
        self.catch_up_ms = 0.0  # the last call's long catch-up (ms), 0 when it had none

    @property
    def one_by_one(self) -> bool:
        """Without the ragged forward nothing is shared: the batch proposes and times each row apart."""
        return self.model is None

    def nbytes(self) -> int:
        return self.model.nbytes() if self.model is not None else 0

    def new_state(self) -> DraftState:
        return DraftState()

    def release(self, state: DraftState) -> None:
        """The row of ``state`` ended: its ragged slot is free (the state keeps its measurements)."""
        if state.slot is not None:
            self.free.append(state.slot)
            state.slot, state.ids = None, []

    def _slot(self, state: DraftState) -> int:
        if state.slot is None:
            state.slot, state.ids = self.free.pop(), []
        return state.slot

    @torch.inference_mode()
    def propose(self, states: list[DraftState], contexts: list) -> list[Draft]:
        ks = [state.begin(ctx, self.proposer.verify_cost) for state, ctx in zip(states, contexts)]
        if self.model is None:  # the draft's own forward, one state after another (the solo computation)
            return [
                self.proposer.chain(state, ctx, k) if k > 0 else Draft.empty()
                for state, ctx, k in zip(states, contexts, ks)
            ]
        drafting: list[_Drafting | None] = []
        for state, ctx, k in zip(states, contexts, ks):
            if k <= 0:
                drafting.append(None)
                continue
            self._slot(state)
            tokens = ctx.tokens
            keep = max(0, min(common_prefix(state.ids, tokens), len(tokens) - 1))
            drafting.append(_Drafting(state, ctx, k, keep, tokens[keep:]))
        active = [d for d in drafting if d is not None]
        times: list[float] = []
        catch_up = max((len(d.feed) for d in active), default=0) > 2
        while active:
            t0 = time.perf_counter()
            logits = self._forward(active)
            for d, lg in zip(active, logits):
                self._draw(d, lg)
            times.append(1000 * (time.perf_counter() - t0))
            active = [d for d in active if not d.done]
        steps = times[1:] if catch_up else times  # a long catch-up (a newcomer's prompt) is not a draft step
        if steps:
            self.draft_ms = sum(steps) / len(steps)
        self.catch_up_ms = times[0] if catch_up and times else 0.0  # the load policy's propose cost leaves it out
        return [self._finish(d) if d is not None else Draft.empty() for d in drafting]

    def _forward(self, active: list[_Drafting]) -> list[torch.Tensor]:
        logits = self.model.forward([(d.state.slot, d.feed, d.start) for d in active])
        for d in active:
            del d.state.ids[d.start :]
            d.state.ids.extend(d.feed)
            d.start += len(d.feed)
        return list(logits[:, : self.vocab] if self.vocab else logits)

    @staticmethod
    def _draw(d: _Drafting, logits: torch.Tensor) -> None:
        sp = d.ctx.params
        confidence = d.ctx.spec.confidence
        if confidence and float(torch.softmax(logits, -1).max()) < confidence:
            d.done = True  # the draft is unsure: stop here (a choice from q alone keeps exactness)
            return
        q = to_probs(logits, sp.temperature, sp.top_k, sp.top_p)
        x = sample(q, None if sp.greedy else d.ctx.generator)
        d.xs.append(x)
        if not sp.greedy:
            d.qs.append(q)
        d.feed = [x]
        d.done = len(d.xs) >= d.k

    def _finish(self, d: _Drafting) -> Draft:
        if self.draft_ms is not None:
            d.state.timed(self.draft_ms)
        d.state.end(d.ctx, d.xs)
        if not d.xs:
            return Draft.empty()
        q = None if d.ctx.params.greedy else torch.stack(d.qs)
        return Draft.chain(torch.tensor(d.xs, dtype=torch.long), q)
