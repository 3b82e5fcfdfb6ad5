"""The propose phase of a batch step: every row's draft, model-backed proposers batched across rows.

Contract: ``Proposers(engine, slots, capacity)`` builds the batched proposers the engine's methods
allow: ``BatchDraft`` for ``draft`` when the draft model takes the ragged lean path (else draft rows
use their own fork, as before), batched heads for ``medusa`` and ``BatchEagle`` for ``eagle`` (one
layer forward per tree level over all its rows). ``propose(rows, target, context)``
gives every row (``rows.Row``) its draft for this step (``Row.drafted``) and returns the rows whose
proposer failed, with the error; the others are ready for the scoring forward. Rows of ``none`` and
``lookup`` propose one by one (lookup is a string search);
a row whose step drafts nothing without a call (its k capped at 0) tells its proposer (``skip``).
A batched group shares its time: each row's ``t_propose`` is the group's time over its size (what
``adapt.LoadPolicy`` charges per row), less a long catch-up (``catch_up_ms``: the step's total).
``release(row)`` returns a leaving row's draft and EAGLE slots.
"""

from __future__ import annotations

import logging
import time

from specdec.core.config import ConfigError
from specdec.core.tree import Draft
from specdec.models.ragged import RaggedLlama
from specdec.proposers.batch_draft import BatchDraft, medusa_propose
from specdec.proposers.eagle.batch import BatchEagle

log = logging.getLogger("specdec.batch")


class Proposers:
    def __init__(self, engine, slots: int, capacity: int) -> None:
        self.draft = None
        self.catch_up_ms = 0.0
        dm = getattr(engine, "draft_model", None)
        if "draft" in engine.proposers and dm is not None and RaggedLlama.supports(dm):
            lean = getattr(engine.proposers["draft"], "lean", None)  # its weights, in the calibrated precision
            self.draft = BatchDraft(dm, slots, capacity, engine.target.vocab, lean)
        self.medusa = engine.proposers.get("medusa")
        eagle = engine.proposers.get("eagle")
        self.eagle = BatchEagle(eagle, slots, capacity) if eagle is not None else None

    def release(self, row) -> None:
        for batched in (self.draft, self.eagle):
            if batched is not None:
                batched.release(row)

    def nbytes(self) -> int:
        draft = self.draft.model.nbytes() if self.draft is not None else 0
        return draft + (self.eagle.nbytes() if self.eagle is not None else 0)

    def propose(self, rows: list, target, context: int) -> list[tuple[object, Exception]]:
        failed: list[tuple[object, Exception]] = []
        self.catch_up_ms = 0.0  # this step's long catch-ups of the batched draft and EAGLE (``_group``)
        groups: dict[str, list] = {"draft": [], "medusa": [], "eagle": []}
        for row in rows:
            try:
                ctx = row.context(target.hidden(row.slot), context)
                method = row.spec.method
                if row.trie is not None:  # token healing: the first step scores the trie
                    row.drafted(row.trie.draft, asked=False)
                elif ctx is None:
                    _skip(row)
                    row.drafted(Draft.empty(), asked=False)
                elif method == "draft" and self.draft is not None:
                    groups["draft"].append((row, ctx))
                elif method in ("medusa", "eagle") and getattr(self, method) is not None:
                    groups[method].append((row, ctx))
                else:
                    row.drafted(row.proposer.propose(ctx))
            except Exception as e:  # noqa: BLE001 - one row fails, never the batch
                _failed(failed, row, e)
        if groups["draft"]:
            self._group(groups["draft"], self.draft.propose, failed, lambda: self.draft.catch_up_ms)
            self.catch_up_ms += self.draft.catch_up_ms
        if groups["medusa"]:
            self._group(groups["medusa"], self._medusa, failed)
        if groups["eagle"]:
            self._group(groups["eagle"], self.eagle.propose, failed, lambda: self.eagle.catch_up_ms)
            self.catch_up_ms += self.eagle.catch_up_ms
        return failed

    def _medusa(self, pairs: list) -> list[Draft]:
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

    @staticmethod
    def _group(pairs: list, fn, failed: list, catch_up=lambda: 0.0) -> None:
        """``fn`` over the group; each row's share of its time, less a long catch-up (``catch_up()``
        ms: feeding a newcomer's prompt or the tokens of a run of plain steps is no draft-token cost,
        as ``proposers/draft.py`` times it solo; the load policy would otherwise see drafting
        priced by the plain steps before it and keep choosing plain)."""
        t0 = time.perf_counter()
        try:
            drafts = fn(pairs)
        except Exception as e:  # noqa: BLE001 - these rows fail, never the batch
            for row, _ in pairs:
                _failed(failed, row, e)
            return
        share = max(0.0, 1000 * (time.perf_counter() - t0) - catch_up()) / len(pairs)
        for (row, _), draft in zip(pairs, drafts):
            row.drafted(draft, share)


def _skip(row) -> None:
    """A step without a call: a proposer that times its steps (lookup's auto k) is told."""
    skip = getattr(row.proposer, "skip", None)
    if skip is not None:
        skip(row.tokens)


def _failed(failed: list, row, e: Exception) -> None:
    if not isinstance(e, ConfigError):
        log.exception("request %r failed", row.handle.request.id)
    failed.append((row, e))
