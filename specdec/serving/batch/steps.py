"""The phases of one batch iteration: pick prefill chunks, prefill, step (propose, score, finish).

Contract: ``Steps`` is the half of ``scheduler.BatchBackend`` that runs on the model thread inside
``_iteration`` (the scheduler's module docstring, steps 3 and 4, says what each phase does and
why); it reads the backend's ``rows``, ``_engine``, ``_target``, ``_proposers``, ``threads``,
``policy``, ``prefill_chunk`` and ends rows through its ``_end``. Split from the scheduler so that
admission, the loop and row bookkeeping stay in one file and the per-step work in another. A
forward's time goes to the thread plan (``threads.ThreadPlan.observe``); a step's to the load
policy, except a step that folded a prefill chunk (its cost is no (rows, q) cost).
"""

from __future__ import annotations

import logging
import time

from specdec.serving.batch.adapt import cap_rows
from specdec.serving.batch.rows import Row, row_probs
from specdec.serving.local import abandoned

log = logging.getLogger("specdec.batch")


class Steps:
    def _pick(self, rows: list[Row]) -> tuple[list[Row], list[int]]:
        """At most ``prefill_chunk`` prompt tokens in all, oldest request first: the oldest
        newcomer gets its first token soonest and running rows wait one chunk."""
        for row in [r for r in rows if r.spec.heal and not r.heal_fitted]:
            try:
                row.fit_heal(self._engine)
            except Exception as e:  # noqa: BLE001 - this row fails (e.g. nothing spells the text)
                rows.remove(row)
                self._target.free(row.slot)
                self._end(row, "error", e)
        picked, budget = [], self.prefill_chunk
        for row in sorted(rows, key=lambda r: r.handle.seq):
            need = max(0, len(row.ids) - 1 - len(self._target.ids[row.slot]))
            if need == 0 or budget > 0:  # nothing to feed (a one-token prompt) or room left
                picked.append((row, min(need, budget)))
                budget -= min(need, budget)
        return [r for r, _ in picked], [c for _, c in picked]

    def _prefill(self, rows: list[Row], chunks: list[int]) -> None:
        """The picked chunks in one forward of their own."""
        if self.threads is not None:
            self.threads.apply(sum(chunks), len(rows))
        t0 = time.perf_counter()
        try:
            done = self._target.prefill_many([(r.slot, r.ids) for r in rows], chunks)
            if self.threads is not None:
                self.threads.observe(1000 * (time.perf_counter() - t0))
        except Exception as e:  # noqa: BLE001 - these rows fail, never the batch
            log.exception("prefill failed")
            for row in rows:
                self._target.free(row.slot)
                self._end(row, "error", e)
            return
        self._prefilled(rows, done, time.perf_counter() - t0)

    def _prefilled(self, rows: list[Row], done: list[bool], dt: float) -> None:
        for row, ok in zip(rows, done):
            row.t_prefill += dt
            if ok:
                row.start(self._engine.tokenizer, row.t_prefill)

    def _step(self, live: list[Row], picked: tuple[list[Row], list[int]] | None = None) -> None:
        engine, target = self._engine, self._target
        entries: list = [None] * len(self.rows)
        t_step = time.perf_counter()
        if self.policy is not None:
            self.policy.chosen = None
            cap_rows(self.policy, live, len(self.rows))
        failed = self._proposers.propose(live, target, engine.context)
        bad = {id(r) for r, _ in failed}
        live = [r for r in live if id(r) not in bad]
        for row in live:
            entries[row.slot] = (row.tokens[-1], row.draft)
        feeds: dict = {}
        if picked is not None:
            if not live:  # every running row failed to propose: the chunks go alone
                self._prefill(*picked)
            else:
                feeds = target.chunks([(r.slot, r.ids) for r in picked[0]], picked[1])
        if live:
            if self.threads is not None:
                tokens = sum(1 + e[1].n for e in entries if e is not None) + sum(map(len, feeds.values()))
                self.threads.apply(tokens, len(live) + len(feeds))
            t0 = time.perf_counter()
            logits = target.step(entries, feeds) if feeds else target.score(entries)
            score_ms = 1000 * (time.perf_counter() - t0)
            if self.threads is not None:
                self.threads.observe(score_ms)
            if picked is not None:
                rows = picked[0]
                self._prefilled(rows, [len(target.ids[r.slot]) == len(r.ids) - 1 for r in rows], score_ms / 1000)
            self.steps += 1
            produced = sum(r.produced for r in live)
            probs = row_probs(live, logits)
            for row in live:
                ev = row.finish(engine, target, logits[row.slot], score_ms, len(live), probs.get(row.slot))
                self._deliver(row, ev)
            if self.policy is not None:
                for row in live:
                    self.policy.observe_row(row.spec.method, *row.counts, row.t_propose, row.cap)
                if not feeds:  # a folded prefill chunk's cost is no (rows, q) cost: not recorded
                    self.policy.observe_forward(len(entries), max(1 + e[1].n for e in entries if e), score_ms)
                    new = sum(r.produced for r in live) - produced
                    ms = 1000 * (time.perf_counter() - t_step) - self._proposers.catch_up_ms  # as its propose cost
                    self.policy.observe_step(len(entries), new, ms)
        for row, e in failed:
            self._end(row, "error", e)
        for row in [r for r in live if r.stop is not None]:
            self._end(row, row.stop)

    @staticmethod
    def _deliver(row: Row, ev) -> None:
        handle = row.handle
        handle.steps += 1
        if handle.cancel_reason is not None:  # cancelled during this step: not delivered
            row.stop = None
            return
        handle._push(ev)
        if ev.stop is None and abandoned(handle):
            handle.steps_at_cancel, handle.cancel_reason = handle.steps, "abandoned"
