"""How many threads a batch forward runs on, by its rows and tokens: learnt from the real forwards.

Why: the engine's calibration (``specdec/fast/calibrate.py``) picks the thread count on the solo plain
step, one token, where a second thread buys nothing on this machine (the step is memory- and
overhead-bound; docs/bench.md). A batch forward of 8 or 16 rows has real arithmetic and attention
per row, and there a second core cut the forward by a quarter to a third (docs/batching.md has the
figures). No constant can say where the crossing lies on another CPU, so the batch measures it.
It measures on the forwards it really runs: round three timed synthetic forwards at start, and on
the model thread that start-up timing picked one thread for 8 rows in most runs, where the real
8-row forwards ran a quarter faster on two (docs/batching.md, round four; round seven found why
the model thread's two-thread forwards were slow: a second OpenMP pool, ``specdec/fast/omp.py``).
Rows and tokens are kept apart because they cost differently: 8 rows of one token read eight
rows' keys and values, one row's chain of 8 tokens reads one row's (``specdec/bench/step_rows.py``
measures both), and a bucket that mixed them carried one shape's choice to the other (one
backend sees lookup's 2-row chains at low load and 8 single-token rows at high load in the same
token bucket).

Contract: ``ThreadPlan(table, solo)`` is a fixed plan: ``threads(tokens, rows)`` is the count of
the largest key of ``table`` at or below ``tokens``, ``solo`` below it. ``ThreadPlan.learn(solo,
counts)`` learns one count per (rows, tokens) bucket (each a power-of-two range: 1, 2-3, 4-7,
8-15, ... : ``bucket``; ``key``): the scheduler calls ``apply(tokens, rows)`` before each forward
(it sets ``torch.set_num_threads`` when the count changes; call it on the thread that runs the
forward) and ``observe(ms)`` after it. A bucket tries every count in turn until each has ``WARM``
forwards, then runs the count whose median ms per token over its last ``KEEP`` forwards is
lowest, preferring the fewest threads within ``MARGIN`` of it (under contention fewer threads
degrade less), and every ``PROBE``-th forward of the bucket runs another count so a changed
machine is noticed. A forward of one token (a batch of one's plain step) is always ``solo``: it
runs exactly as the solo path. ``table`` is JSON-ready (``{"ROWSxTOKENS": threads}`` with each
bucket's first sizes, what each bucket runs now) for stats; ``samples`` the forwards seen per bucket.
Exactness never depends on this: thread counts change float rounding at most (docs/batching.md).
"""

from __future__ import annotations

import statistics
import time
from collections import deque

import torch

from specdec.core.tree import Draft
from specdec.fast.calibrate_time import thread_counts

MARGIN = 0.05
WARM = 4  # forwards per (bucket, count) before the bucket trusts its medians
KEEP = 24  # recent forwards per (bucket, count) the median is taken over
PROBE = 16  # every PROBE-th forward of a bucket runs the count it is not running


def bucket(tokens: int) -> int:
    """The first size of ``tokens``' bucket: 2-3 -> 2, 4-7 -> 4, 8-15 -> 8, ... (1 for one token)."""
    b = 1
    while b * 2 <= tokens:
        b *= 2
    return b


def key(rows: int, tokens: int) -> str:
    """A forward's bucket as ``table`` names it: "ROWSxTOKENS", each its bucket's first size."""
    return f"{bucket(rows)}x{bucket(tokens)}"


class ThreadPlan:
    def __init__(self, table: dict[int, int], solo: int, counts: list[int] | None = None) -> None:
        self._fixed, self.solo = dict(sorted(table.items())), solo
        self.counts = sorted(set(counts)) if counts else None  # None: a fixed plan
        self._ms: dict[tuple[str, int], deque] = {}
        self._seen: dict[str, int] = {}
        self._choice: dict[str, int] = {}
        self._applied: tuple[str, int, int] | None = None  # (bucket key, threads, tokens) of the forward

    @classmethod
    def learn(cls, solo: int, counts: list[int] | None = None) -> ThreadPlan:
        counts = sorted(set(counts or thread_counts()))
        return cls({}, solo, counts if len(counts) > 1 else None)

    @property
    def table(self) -> dict:
        return dict(self._fixed) if self.counts is None else dict(sorted(self._choice.items()))

    @property
    def samples(self) -> dict[str, int]:
        return dict(sorted(self._seen.items()))

    def threads(self, tokens: int, rows: int = 1) -> int:
        if tokens < 2:
            return self.solo
        if self.counts is None:
            n = self.solo
            for rows, t in self._fixed.items():
                if rows <= tokens:
                    n = t
            return n
        return self._pick(key(rows, tokens))

    def _pick(self, b: str) -> int:
        seen = self._seen.get(b, 0)
        counts = self.counts
        cold = [n for n in counts if len(self._ms.get((b, n), ())) < WARM]
        if cold:  # in turn, fewest samples first
            return min(cold, key=lambda n: len(self._ms.get((b, n), ())))
        med = {n: statistics.median(self._ms[(b, n)]) for n in counts}
        fastest = min(med.values())
        best = min(n for n in counts if med[n] <= fastest * (1 + MARGIN))
        self._choice[b] = best
        if seen % PROBE == PROBE - 1:
            others = [n for n in counts if n != best]
            return others[(seen // PROBE) % len(others)]
        return best

    def apply(self, tokens: int, rows: int = 1) -> None:
        n = self.threads(tokens, rows)
        self._applied = (key(rows, tokens), n, tokens) if tokens >= 2 and self.counts is not None else None
        if n != torch.get_num_threads():  # process-wide: someone else may have set it
            torch.set_num_threads(n)

    def observe(self, ms: float) -> None:
        """The forward ``apply`` prepared took ``ms``."""
        if self._applied is None:
            return
        b, n, tokens = self._applied
        self._applied = None
        self._ms.setdefault((b, n), deque(maxlen=KEEP)).append(ms / tokens)
        self._seen[b] = self._seen.get(b, 0) + 1


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
