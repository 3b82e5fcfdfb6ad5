"""Auto k = 0 for the tree methods (Medusa, EAGLE): a plain step whenever drafting does not pay.

Why: a tree's cost is per step (one head pass, a wider verification) and its payoff is the tokens
a step commits (tau); on a machine or a text where tau does not cover the step's extra cost, the
method would be slower than plain decoding. There is no closed form for a tree's tau, so the rule
uses the measured rates directly: the wall time from one ``propose`` call to the next is one whole
step (propose, score, verify, commit), and the tokens committed in between are its yield.

Contract:
- ``drafting_pays(tau, step_ratio, margin)``: a pure decision, tests inject it: drafting beats a
  plain step when the tokens per drafting step exceed the drafting step's cost in plain steps.
- ``PlainFallback.plain(ctx)`` at the start of ``propose``: records the previous step of the same
  request (decayed sums, so the rates follow the text), then says whether this step should be plain
  (only with ``ctx.spec.k == "auto"``): never before a drafting step was measured; one plain step
  to measure it when no plain step was; then ``drafting_pays``, except that every
  ``probe_every``-th plain step in a row drafts, so the drafting rate keeps being measured.
  ``plain_run`` belongs to one request (a new token list starts it at 0); the rates carry over.
  ``drafted(n)`` after it says whether the step drafted (a proposer may return an empty draft for
  its own reasons); ``chose_plain`` is what the engine counts in ``Stats.auto_plain``.
"""

from __future__ import annotations

import time

PROBE_EVERY = 8  # as for chains (proposers/draft.py)


def drafting_pays(tau: float, step_ratio: float, margin: float = 0.0) -> bool:
    """tau: tokens committed per drafting step; step_ratio: a drafting step's seconds over a plain
    step's. Plain steps commit one token each, so drafting pays when tau > step_ratio."""
    return tau > step_ratio * (1.0 + margin)


class PlainFallback:
    def __init__(self, decay: float = 0.9, probe_every: int = PROBE_EVERY, clock=time.perf_counter) -> None:
        self.decay, self.probe_every, self.clock = decay, probe_every, clock
        self.sums = {True: [0.0, 0.0, 0.0], False: [0.0, 0.0, 0.0]}  # drafted? -> [steps, tokens, seconds]
        self.plain_run = 0
        self.chose_plain = False
        self._last: tuple | None = None  # (token list, its length, start time, drafted?)

    def _record(self, ctx, now: float) -> None:
        last, self._last = self._last, None
        if last is None or last[0] is not ctx.tokens:
            self.plain_run = 0  # another request: its own run of plain steps
            return
        if len(ctx.tokens) <= last[1]:
            return  # nothing committed: not a step
        s = self.sums[last[3]]
        for i, v in enumerate((1.0, float(len(ctx.tokens) - last[1]), now - last[2])):
            s[i] = self.decay * s[i] + v

    def rates(self) -> tuple[float, float] | None:
        """(tau, step_ratio) from the decayed sums, or None before both kinds were measured."""
        (ds, dt, dsec), (ps, _pt, psec) = self.sums[True], self.sums[False]
        if ds <= 0 or ps <= 0 or psec <= 0:
            return None
        return dt / ds, (dsec / ds) / (psec / ps)

    def plain(self, ctx) -> bool:
        now = self.clock()
        self._record(ctx, now)
        plain = False
        if ctx.spec.k == "auto" and ctx.budget > 0 and self.sums[True][0] > 0:
            rates = self.rates()
            if rates is None:
                plain = self.sums[False][0] == 0  # measure one plain step
            elif not drafting_pays(*rates):
                plain = self.plain_run + 1 < self.probe_every
        self.chose_plain = plain
        self.plain_run = self.plain_run + 1 if plain else 0
        self._last = (ctx.tokens, len(ctx.tokens), now, False)
        return plain

    def drafted(self, n: int) -> None:
        if self._last is not None and n > 0:
            self._last = self._last[:3] + (True,)
