"""The batch's proposers that run a model: the draft model and Medusa's heads, over all their rows.

Contract:
- ``BatchDraft(model, slots, capacity, vocab, lean=None)``: the draft model for every ``draft`` row
  of a step, on ``lean``'s weights when given (the single-request draft's ``DraftModel.lean``, so
  the precision calibration chose for the draft applies to batch rows as to solo ones).
  ``propose(rows)`` takes ``(row, ctx)`` pairs (``rows.Row`` and its ``Context``) and returns one
  ``Draft`` per pair. Per row it follows ``proposers/draft.py``'s ``DraftModel.propose`` step for
  step, with the row's own ``draft_k.DraftState`` (``row.proposer.state``: its acceptance
  tracker, step time, plain run) through the same ``begin`` / ``timed`` / ``end`` calls the solo
  proposer makes: k, confidence stop, q = to_probs(logits, the row's parameters), one sample per
  token from the row's own generator, in the same order as solo, so a row's draws are those of its
  solo run. The forwards are shared: ONE ragged forward catches every row's draft cache up with its
  committed tokens (longest common prefix, as solo), then ONE forward per drafting position over
  the rows still drafting (``ragged.RaggedLlama``). Each row holds a draft slot (``DraftState.slot``)
  from the first time it drafts until ``release(row)``; ``draft_ms`` is the last step's time per drafting forward.
- ``medusa_propose(medusa, pairs)``: Medusa's heads over all Medusa rows at once (one block and
  one projection per head over the rows' stacked hidden states), each row's tree cut as solo;
  ``BatchMedusa(medusa).propose(pairs)`` takes ``(row, ctx)`` pairs as ``BatchDraft`` does (a row
  with no room or no hidden state yet gets an empty draft, as solo).
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


class _State:
    """One row's drafting in flight: its sampled tokens and q rows so far."""

    def __init__(self, row, ctx, k: int, start: int, feed: list[int]) -> None:
        self.row, self.ctx, self.k, self.start, self.feed = row, ctx, k, start, feed
        self.xs: list[int] = []
        self.qs: list[torch.Tensor] = []
        self.done = False


class BatchDraft:
    def __init__(self, model: torch.nn.Module, slots: int, capacity: int, vocab: int | None = None, lean=None) -> None:
        self.model = RaggedLlama(model, slots, capacity, lean)
        self.vocab = vocab
        self.ids: dict[int, list[int]] = {}  # slot -> tokens its cache holds
        self.free = list(range(slots - 1, -1, -1))
        self.draft_ms: float | None = None
        self.catch_up_ms = 0.0  # the last call's long catch-up (ms), 0 when it had none

    def nbytes(self) -> int:
        return self.model.nbytes()

    def release(self, row) -> None:
        state = getattr(row.proposer, "state", None)  # a draft row's DraftState; other rows hold none
        if getattr(state, "slot", None) is not None:
            self.ids.pop(state.slot, None)
            self.free.append(state.slot)
            state.slot = None

    def _slot(self, row) -> int:
        state = row.proposer.state
        if state.slot is None:
            state.slot = self.free.pop()
            self.ids[state.slot] = []
        return state.slot

    @torch.inference_mode()
    def propose(self, pairs: list) -> list[Draft]:
        states: list[_State | None] = []
        for row, ctx in pairs:
            k = row.proposer.state.begin(ctx, row.proposer.verify_cost)
            if k <= 0:
                states.append(None)
                continue
            slot, tokens = self._slot(row), ctx.tokens
            keep = max(0, min(common_prefix(self.ids[slot], tokens), len(tokens) - 1))
            states.append(_State(row, ctx, k, keep, tokens[keep:]))
        active = [s for s in states if s is not None]
        times: list[float] = []
        catch_up = max((len(s.feed) for s in active), default=0) > 2
        while active:
            t0 = time.perf_counter()
            logits = self._forward(active)
            for st, lg in zip(active, logits):
                self._draw(st, lg)
            times.append(1000 * (time.perf_counter() - t0))
            active = [s for s in active if not s.done]
        steps = times[1:] if catch_up else times  # a long catch-up (a newcomer's prompt) is not a draft step
        if steps:
            self.draft_ms = sum(steps) / len(steps)
        self.catch_up_ms = times[0] if catch_up and times else 0.0  # the load policy's propose cost leaves it out
        return [self._finish(st) if st is not None else Draft.empty() for st in states]

    def _forward(self, active: list[_State]) -> list[torch.Tensor]:
        rows = [(st.row.proposer.state.slot, st.feed, st.start) for st in active]
        logits = self.model.forward(rows)
        for st in active:
            ids = self.ids[st.row.proposer.state.slot]
            del ids[st.start :]
            ids.extend(st.feed)
            st.start += len(st.feed)
        return list(logits[:, : self.vocab] if self.vocab else logits)

    @staticmethod
    def _draw(st: _State, logits: torch.Tensor) -> None:
        sp = st.ctx.params
        confidence = st.ctx.spec.confidence
        if confidence and float(torch.softmax(logits, -1).max()) < confidence:
            st.done = True  # the draft is unsure: stop here (a choice from q alone keeps exactness)
            return
        q = to_probs(logits, sp.temperature, sp.top_k, sp.top_p)
        x = sample(q, None if sp.greedy else st.ctx.generator)
        st.xs.append(x)
        if not sp.greedy:
            st.qs.append(q)
        st.feed = [x]
        st.done = len(st.xs) >= st.k

    def _finish(self, st: _State) -> Draft:
        state = st.row.proposer.state
        if self.draft_ms is not None:
            state.timed(self.draft_ms)
        state.end(st.ctx, st.xs)
        if not st.xs:
            return Draft.empty()
        q = None if st.ctx.params.greedy else torch.stack(st.qs)
        return Draft.chain(torch.tensor(st.xs, dtype=torch.long), q)


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
    """Medusa's batch form (``Method.make_batch``): the rows' trees from one batched heads call."""

    catch_up_ms = 0.0  # the heads read the target's hidden state: nothing to catch up

    def __init__(self, medusa) -> None:
        self.medusa = medusa

    def release(self, row) -> None:
        pass

    def nbytes(self) -> int:
        return 0

    def propose(self, pairs: list) -> list[Draft]:
        m = self.medusa
        drafts: list[Draft | None] = [None] * len(pairs)
        todo = []
        for i, (_, ctx) in enumerate(pairs):
            n = min(m.n_nodes, ctx.budget, ctx.k_max or m.n_nodes)
            if n <= 0 or ctx.hidden is None or len(ctx.hidden) == 0:
                drafts[i] = Draft.empty()  # a one-token prompt has no hidden state yet (as solo)
            else:
                todo.append((i, n, ctx.hidden[-1]))
        if todo:
            for (i, _, _), d in zip(todo, medusa_propose(m, [(n, h) for _, n, h in todo])):
                drafts[i] = d
        return drafts
