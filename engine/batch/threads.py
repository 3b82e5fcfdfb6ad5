"""How many threads a batch forward runs on, by the tokens it carries: measured at start.

Why: the engine's calibration (``engine/calibrate.py``) picks the thread count on the solo plain
step, one token, where a second thread buys nothing on this machine (the step is memory- and
overhead-bound; docs/bench.md). A batch forward of 8 or 16 rows has real arithmetic and attention
per row, and there a second core cut the forward by a quarter to a third (docs/batching.md has the
figures). No constant can say where the crossing lies on another CPU, so the batch measures it.

Contract: ``ThreadPlan.measure(time_fn, slots, solo, counts)`` times ``time_fn(rows, 1)`` (ms;
``time_rows``: the batch target's forward over ``rows`` idle slots each made to hold half a slot of
prefix, since attention over a long prefix is where threads pay) at rows 2, 4, 8, ...
up to ``slots`` with each thread count in ``counts`` (interleaved, best of ``repeats``) and keeps,
per row count, the fewest threads within ``MARGIN`` of the fastest (as calibration does: under
contention fewer threads degrade less), never fewer than a smaller row count got (timing noise
must not make a larger batch run on fewer threads); one untimed forward over every slot first.
``threads(tokens)`` is the choice for a forward of that
many tokens: the largest measured row count at or below it, ``solo`` below 2 (a batch of one runs
exactly as the solo path). ``apply(tokens)`` sets ``torch.set_num_threads`` when it changes; call it
on the thread that runs the forward. ``table`` is JSON-ready (``{rows: threads}``) for stats.
Exactness never depends on this: thread counts change float rounding at most (docs/batching.md).
"""

from __future__ import annotations

import time

import torch

from ..calibrate_time import thread_counts
from ..tree import Draft

MARGIN = 0.05


class ThreadPlan:
    def __init__(self, table: dict[int, int], solo: int) -> None:
        self.table, self.solo = dict(sorted(table.items())), solo
        self.timings: dict = {}

    @classmethod
    def measure(cls, time_fn, slots: int, solo: int, counts: list[int] | None = None, repeats: int = 3) -> ThreadPlan:
        counts = sorted(set(counts or thread_counts()))
        before, table, timings = torch.get_num_threads(), {}, {}
        rows = 2
        try:
            if len(counts) > 1 and slots >= 2:
                time_fn(slots, 1)  # untimed: the first forward touches every slot's cache pages
            while rows <= slots and len(counts) > 1:
                best = {n: float("inf") for n in counts}
                for _ in range(repeats):
                    for n in counts:
                        torch.set_num_threads(n)
                        best[n] = min(best[n], time_fn(rows, 1))
                fastest = min(best.values())
                pick = min(n for n, t in best.items() if t <= fastest * (1 + MARGIN))
                table[rows] = max(pick, *table.values()) if table else pick  # more rows never fewer threads
                timings[rows] = {n: round(t, 3) for n, t in best.items()}
                rows *= 2
        finally:
            torch.set_num_threads(before)
        plan = cls(table, solo)
        plan.timings = timings
        return plan

    def threads(self, tokens: int) -> int:
        n = self.solo
        for rows, t in self.table.items():
            if rows <= tokens:
                n = t
        return n

    def apply(self, tokens: int) -> None:
        n = self.threads(tokens)
        if n != torch.get_num_threads():  # process-wide: someone else may have set it
            torch.set_num_threads(n)


def time_rows(target, rows: int, q: int, prefix: int | None = None) -> float:
    """ms of one ``BatchTarget.score`` over ``rows`` idle slots, each posing as a request with
    ``prefix`` cached tokens (default half a slot; the cache's contents do not matter to the time)."""
    L = target.capacity // 2 if prefix is None else prefix
    for s in range(rows):
        target.ids[s] = [0] * L
        target.cache.lengths[s] = L
    try:
        t0 = time.perf_counter()
        target.score([(0, Draft.chain([0] * (q - 1)))] * rows)
        return 1000 * (time.perf_counter() - t0)
    finally:
        for s in range(rows):
            target.free(s)
