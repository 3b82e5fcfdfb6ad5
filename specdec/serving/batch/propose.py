"""The propose phase of a batch step: every row's draft, model-backed proposers batched across rows.

Contract: ``Proposers(engine, slots, capacity)`` builds the batch form of every method the engine
offers whose registry entry names one (``Method.make_batch``, ``core/methods.py``; no method name
appears here): today ``BatchDraft`` for ``draft`` (one ragged forward per drafting position over
all its rows where the draft takes it), ``BatchMedusa`` (the heads batched), ``BatchEagle`` (one
layer forward per tree level over all its rows) and ``LookupRows`` (a string search per row). Each
form's ``propose(states, contexts)`` is its method's one proposal, the solo proposer's batch of one;
``batched[method].new_state()`` gives a row its state (``rows.States``).
``propose(rows, target, context)`` gives every row (``rows.Row``) its draft for this step
(``Row.drafted``) and returns the rows whose proposer failed, with the error; the others are ready
for the scoring forward. Rows of a method without a batch form (``none``) call the shared
proposer's ``propose(ctx)``; a row whose step drafts nothing without a call (its k capped at 0)
tells its state (``skip``, where the state has one: lookup's auto k times its steps).
A batched group shares its time: each row's ``t_propose`` is the group's time over its size (what
``adapt.LoadPolicy`` charges per row), less a long catch-up (``catch_up_ms``: the step's total); a
form that shares nothing (``one_by_one``) proposes and times each row apart.
``release(row)`` returns a leaving row's slots to its form (the state itself goes back to ``States``).
"""

from __future__ import annotations

import logging
import time

from specdec.core import methods as M
from specdec.core.config import ConfigError
from specdec.core.proposer import Skips, one_by_one
from specdec.core.tree import Draft

log = logging.getLogger("specdec.batch")


class Proposers:
    def __init__(self, engine, slots: int, capacity: int) -> None:
        self.catch_up_ms = 0.0
        self.batched: dict = {}  # method -> its batch form (the registry's ``batch``), in registry order
        for name, method in M.METHODS.items():
            proposer = engine.proposers.get(name)
            batched = method.make_batch(proposer, slots, capacity) if proposer is not None else None
            if batched is not None:
                self.batched[name] = batched

    def release(self, row) -> None:
        form = self.batched.get(row.spec.method)
        if form is not None and row.state is not None:
            form.release(row.state)

    def nbytes(self) -> int:
        return sum(b.nbytes() for b in self.batched.values())

    def propose(self, rows: list, target, context: int) -> list[tuple[object, Exception]]:
        failed: list[tuple[object, Exception]] = []
        self.catch_up_ms = 0.0  # this step's long catch-ups of the batched forms (``_group``)
        groups: dict[str, list] = {name: [] for name in self.batched}
        for row in rows:
            try:
                ctx = row.context(target.hidden(row.slot), context)
                method = row.spec.method
                if row.trie is not None:  # token healing: the first step scores the trie
                    row.drafted(row.trie.draft, asked=False)
                elif ctx is None:
                    _skip(row)
                    row.drafted(Draft.empty(), asked=False)
                elif method in self.batched and one_by_one(self.batched[method]):
                    row.drafted(self.batched[method].propose([row.state], [ctx])[0])
                elif method in self.batched:
                    groups[method].append((row, ctx))
                else:
                    row.drafted(row.proposer.propose(ctx))
            except Exception as e:  # noqa: BLE001 - one row fails, never the batch
                _failed(failed, row, e)
        for name, pairs in groups.items():
            if pairs:
                batched = self.batched[name]
                self._group(pairs, batched.propose, failed, lambda b=batched: b.catch_up_ms)
                self.catch_up_ms += batched.catch_up_ms
        return failed

    @staticmethod
    def _group(pairs: list, fn, failed: list, catch_up=lambda: 0.0) -> None:
        """``fn`` (a form's ``propose(states, contexts)``) over the group; each row's share of its
        time, less a long catch-up (``catch_up()`` ms: feeding a newcomer's prompt or the tokens of a
        run of plain steps is no draft-token cost, as ``proposers/draft.py`` times it solo; the load
        policy would otherwise see drafting priced by the plain steps before it and keep choosing
        plain)."""
        t0 = time.perf_counter()
        try:
            drafts = fn([row.state for row, _ in pairs], [ctx for _, ctx in pairs])
        except Exception as e:  # noqa: BLE001 - these rows fail, never the batch
            for row, _ in pairs:
                _failed(failed, row, e)
            return
        share = max(0.0, 1000 * (time.perf_counter() - t0) - catch_up()) / len(pairs)
        for (row, _), draft in zip(pairs, drafts):
            row.drafted(draft, share)


def _skip(row) -> None:
    """A step without a call: a state that times its steps (lookup's auto k) is told."""
    if isinstance(row.state, Skips):
        row.state.skip()


def _failed(failed: list, row, e: Exception) -> None:
    if not isinstance(e, ConfigError):
        log.exception("request %r failed", row.handle.request.id)
    failed.append((row, e))
