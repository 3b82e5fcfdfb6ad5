"""One request inside the batch: its state and the per-row phases of a step.

Contract: ``Row`` holds what ``specdec/engine/session.py``'s loop keeps in local variables (committed
tokens, generator, detokenizer, stats, the proposer) plus its slot. A step of the batch is
``propose`` for every row, ONE ``BatchTarget.score`` over all rows, every row's p at once
(``row_probs``: one ``to_probs`` per sampling setting, each row's floats what its own call gives),
then ``finish`` for every row: ``specdec.core.step.finish``, the single-request loop's own steps
3-5 (verify with the row's own sampling parameters and generator, commit the row's own accepted
path in its slot, pieces, stats and the event), so a row's tokens and events are those of its solo
run whatever shares the batch (up to the float rounding
discussed in docs/batching.md). Under the load policy's cap a chain row with k "auto" drafts the
cap (``spec_for``).
Every row shares its method's proposer (the engine's: weights, settings) and holds its own
per-request ``state`` from the method's batch form (``States``: the draft model's ``DraftState``,
EAGLE's ``EagleState`` with its KV, Medusa's ``MedusaState``, prompt lookup's ``LookupState``), so
rows never make each other resynchronise; a method without a batch form has no state (None).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import torch

from specdec.core import healing
from specdec.core import methods as M
from specdec.core.config import GenerateSpec
from specdec.core.detok import Detokenizer
from specdec.core.events import Stats, StepEvent
from specdec.core.proposer import Context, plain_choice
from specdec.core.sampling import to_probs
from specdec.core.step import finish as finish_step
from specdec.core.step import generator
from specdec.core.tree import Draft
from specdec.serving.batch.adapt import ADAPTIVE


@dataclass(frozen=True)
class BatchStepEvent(StepEvent):
    """A ``StepEvent`` with what the batch did in this step: ``batch`` = {"rows": requests scored
    together, "k": the draft cap the load policy gave this row (None: its own k)}."""

    batch: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "batch": dict(self.batch)}


class States:
    """Per-row proposer state: a method whose registry entry names a batch form gives each row a
    state of its own (``form.new_state()``), recycled when rows end, so what a state measures (a
    draft's step time and acceptance, auto k's rates and probe schedule) carries over the requests
    it serves, as the solo proposer's own state does; a method without one gives None."""

    def __init__(self, forms: dict) -> None:
        self.forms, self.free = forms, {name: [] for name in forms}

    def take(self, method: str):
        if method not in self.forms:
            return None
        return self.free[method].pop() if self.free[method] else self.forms[method].new_state()

    def give(self, method: str, state) -> None:
        if state is not None and method in self.free:
            self.free[method].append(state)


def row_probs(rows: list, logits: list) -> dict[int, torch.Tensor]:
    """Each row's p (by slot) from its logits, one ``to_probs`` per sampling setting over all the
    rows that share it: the work is per row along the vocabulary (argmax, softmax, sort), so a
    row's p is what its own call gives, and a batch of greedy rows pays one call, not one each.
    Rows that heal (their first step scores a trie) are left out."""
    groups: dict[tuple, list] = {}
    for row in rows:
        if row.trie is None:
            sp = row.spec.sampling
            groups.setdefault((sp.temperature, sp.top_k, sp.top_p), []).append(row)
    out: dict[int, torch.Tensor] = {}
    for (t, top_k, top_p), group in groups.items():
        if len(group) == 1:
            out[group[0].slot] = to_probs(logits[group[0].slot], t, top_k, top_p)
            continue
        p, at = to_probs(torch.cat([logits[r.slot] for r in group]), t, top_k, top_p), 0
        for r in group:
            n = logits[r.slot].shape[0]
            out[r.slot], at = p[at : at + n], at + n
    return out


@dataclass(eq=False)
class Row:
    handle: Any
    ids: list[int]
    proposer: Any  # the method's proposer, shared by every row of the method
    slot: int
    state: Any = None  # this request's proposer state (``States``), None for a stateless method
    prefilled: bool = False
    tokens: list[int] = field(default_factory=list)
    produced: int = 0
    step: int = 0
    target_ms: float | None = None
    k_cap: int | None = None  # the scheduler's cap on this row's draft this step (None: the method's)
    draft: Draft | None = None
    t_start: float = field(default_factory=time.perf_counter)
    t_propose: float = 0.0
    t_begin: float = 0.0
    t_prefill: float = 0.0
    stop: str | None = None  # set by finish when this step ended the request
    counts: tuple[int, int, int] = (0, 0, 0)  # this step's tested, accepted, drafted
    trie: Any = None  # token healing: the trie the first step draws from (specdec/core/healing.py)
    heal_fitted: bool = False
    chose_plain: bool = False  # this step's proposer was asked and its auto k chose a plain step

    def __post_init__(self) -> None:
        self.spec = self.handle.request.spec
        self.corpus = tuple(self.handle.request.corpus)
        self.tokens = list(self.ids)
        self.gen = generator(self.spec)
        self.k_max = M.k_max(self.spec.method, self.spec.k)
        self.stats = Stats()
        self.detok = None
        self._capped: dict[int, GenerateSpec] = {}  # spec_for's specs by cap

    def fit_heal(self, engine) -> None:
        """Token healing as solo (``healing.fit``): the prompt may take the heal text's head, and
        the first step draws from the trie of what is left (``finish_heal``)."""
        self.heal_fitted = True
        self.ids, self.trie = healing.fit(engine, self.ids, self.spec.heal)
        self.tokens = list(self.ids)

    def start(self, tokenizer, prefill_s: float) -> None:
        self.prefilled = True
        self.stats = Stats(prefill_s=prefill_s)
        self.detok = Detokenizer(tokenizer, self.ids)

    def context(self, hidden: torch.Tensor, context: int) -> Context | None:
        """Start this row's step: its proposer's ``Context``, or None for a plain step."""
        self.t_begin = time.perf_counter()
        self.step += 1
        budget = min(self.spec.max_new_tokens - self.produced - 1, context - len(self.tokens))
        cap = self.cap
        if budget > 0 and cap != 0:
            tenant = self.handle.request.tenant
            return Context(
                self.tokens, self.spec_for(cap), budget, cap, self.gen, hidden, self.target_ms, self.corpus, tenant
            )
        return None

    def spec_for(self, cap: int) -> GenerateSpec:
        """The spec the proposer sees: a chain row with k "auto" under the load policy's cap drafts
        that k (``dataclasses.replace``: the proposer's own auto k does not choose again under
        it, which kept the policy from ever measuring deep drafts: round eight in docs/batching.md);
        otherwise the request's own."""
        if self.k_cap is None or self.spec.k != "auto" or self.spec.method not in ADAPTIVE:
            return self.spec
        if cap not in self._capped:
            self._capped[cap] = replace(self.spec, k=cap)
        return self._capped[cap]

    @property
    def cap(self) -> int | None:
        """The most this row may draft this step: its k (or the method's auto cap) under the
        scheduler's cap; None for a tree method's own budget."""
        return self.k_max if self.k_cap is None else min(self.k_cap, self.k_max or self.k_cap)

    def drafted(self, draft: Draft, propose_ms: float | None = None, asked: bool = True) -> tuple[int, Draft]:
        """This step's draft (``propose_ms``: this row's share of a batched proposal's time;
        ``asked``: the proposer was called, so an empty draft may be its auto k choosing plain)."""
        self.draft = draft
        src = self.proposer if self.state is None else self.state
        self.chose_plain = asked and draft.n == 0 and plain_choice(src)
        self.t_propose = 1000 * (time.perf_counter() - self.t_begin) if propose_ms is None else propose_ms
        return self.tokens[-1], draft

    def finish(self, engine, target, logits: torch.Tensor, score_ms: float, rows: int, p) -> StepEvent:
        """Steps 3-5 for this row: ``specdec.core.step.finish``, the single-request loop's own code,
        with ``p`` this row's probabilities (``row_probs``) and the commit on this row's slot; a
        healing row (no ``p``) draws from its ``logits`` (``specdec.core.healing.finish``)."""
        batch = {"rows": rows, "k": self.k_cap}
        commit = partial(target.commit, self.slot)
        if self.trie is not None:
            trie, self.trie = self.trie, None
            ev = healing.finish(self, trie, logits, commit, engine.eos_ids, score_ms, BatchStepEvent, batch=batch)
            self.stop, self.counts = ev.stop, (0, 0, 0)
            return ev
        self.target_ms = score_ms if self.target_ms is None else 0.8 * self.target_ms + 0.2 * score_ms
        timings = {"propose": self.t_propose, "score": score_ms}
        ev, verdict = finish_step(
            self,
            self.draft,
            logits,
            p,
            commit,
            engine.eos_ids,
            engine.context,
            timings,
            self.chose_plain,
            BatchStepEvent,
            batch=batch,
        )
        self.stop = ev.stop
        self.counts = (len(verdict.tested), len(verdict.path), self.draft.n)
        return ev
