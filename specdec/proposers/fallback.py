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
  to measure it when no plain step was; then ``drafting_pays``, except that a probe drafts after a
  run of plain steps (``ProbeBackoff``), so the drafting rate keeps being measured.
- ``ProbeBackoff(base, cap, since=0)``: the probe schedule, shared with the draft model's k rule
  (``draft_k.py``). ``drafts(pays)``: True when drafting pays, or when ``every`` plain steps have
  passed since the last drafting step (a probe); ``plain()`` counts a plain step decided
  elsewhere. ``every`` starts at ``base``, doubles after each probe that left drafting unpaid, up
  to ``cap``, and returns to ``base`` when drafting pays. The count spans requests, as the rates
  it keeps measured do. Why: where a method never pays (SmolLM2's heads on most text), a probe
  every 8th step cost 6-11% of the speed (a probe of a 16-node tree costs about two plain steps
  and commits about 1.3 tokens); backed off, the probes cost an eighth of that, and a text where
  drafting starts to pay is still found within ``cap`` plain steps. Counted per request, as
  before, a request shorter than ``every`` steps (an editor's 48-token completion) would never
  probe again.
  ``plain_run`` belongs to one request (a new token list starts it at 0; a statistic); the rates
  and the probe schedule carry over.
  ``drafted(n)`` after it says how many nodes the step drafted (a proposer may return an empty
  draft for its own reasons); ``chose_plain`` is what the engine counts in ``Stats.auto_plain``.
- The same clock, for a proposer with a rule of its own (prompt lookup's k, ``lookup_k.py``):
  ``begin(ctx)`` records the previous step and starts timing this one, ``chose(plain)`` sets
  ``chose_plain`` and the run; ``by_size`` keeps the decayed [steps, seconds] of steps per draft
  size (0 = plain), each sample clipped to ``CLIP`` times its size's mean (a size's first, to the
  plain steps' mean) so that one stalled step (a descheduled process) does not stand for many;
  ``skip()`` says a step of this request ran without a call (a batch's cap of 0), so the interval,
  which holds two steps, is not recorded.
- ``TreeState()``: one request's state for a tree method (Medusa's ``MedusaState``, EAGLE's
  ``EagleState`` with its cache besides): its ``fallback`` (a ``PlainFallback``) and ``chose_plain``.
  The solo proposer holds one (``proposer.state``) and every batch row its own, recycled when rows
  end, so the rates and the probe schedule span the requests that state serves.
"""

from __future__ import annotations

import copy
import time

PROBE_EVERY = 8  # as for chains (proposers/draft.py)
PROBE_MAX = 64  # the longest run of plain steps between probes (ProbeBackoff)
CLIP = 2.0  # a by_size sample counts as at most this many times its size's mean (or the plain one's)


def drafting_pays(tau: float, step_ratio: float, margin: float = 0.0) -> bool:
    """tau: tokens committed per drafting step; step_ratio: a drafting step's seconds over a plain
    step's. Plain steps commit one token each, so drafting pays when tau > step_ratio."""
    return tau > step_ratio * (1.0 + margin)


class ProbeBackoff:
    """When probes draft in a run of plain steps: see the module docstring."""

    def __init__(self, base: int = PROBE_EVERY, cap: int = PROBE_MAX, since: int = 0) -> None:
        self.base, self.cap = base, max(base, cap)
        self.every, self.probed, self.since = base, False, since  # since: plain steps since a draft

    def drafts(self, pays: bool) -> bool:
        if pays:
            self.every, self.probed, self.since = self.base, False, 0
            return True
        if self.probed:  # the last probe did not make drafting pay: wait twice as long for the next
            self.every = min(2 * self.every, self.cap)
        self.probed = self.since + 1 >= self.every
        self.since = 0 if self.probed else self.since + 1
        return self.probed

    def plain(self) -> None:
        self.since += 1


class PlainFallback:
    def __init__(
        self, decay: float = 0.9, probe_every: int = PROBE_EVERY, clock=time.perf_counter, probe_max: int = PROBE_MAX
    ) -> None:
        self.decay, self.probe_every, self.clock = decay, probe_every, clock
        self.probe = ProbeBackoff(probe_every, probe_max)
        self.sums = {True: [0.0, 0.0, 0.0], False: [0.0, 0.0, 0.0]}  # drafted? -> [steps, tokens, seconds]
        self.by_size: dict[int, list[float]] = {}  # draft size -> [steps, seconds] (0 = plain)
        self.plain_run = 0
        self.chose_plain = False
        self._last: tuple | None = None  # (token list, its length, start time, draft size or None)

    def carried(self) -> PlainFallback:
        """A copy for another request: the measurements (deep; the probe schedule shared), no step
        in flight, no run of plain steps."""
        f = copy.copy(self)
        f.sums, f.by_size = copy.deepcopy(self.sums), copy.deepcopy(self.by_size)
        f.forget_run()
        return f

    def forget_run(self) -> None:
        """No step in flight and no run of plain steps (another request follows)."""
        self._last, self.plain_run, self.chose_plain = None, 0, False

    def _record(self, ctx, now: float) -> None:
        last, self._last = self._last, None
        if last is None or last[0] is not ctx.tokens:
            self.plain_run = 0  # another request: its own run of plain steps
            return
        if len(ctx.tokens) <= last[1] or last[3] is None:
            return  # nothing committed, or a skipped step in between: not one step
        n, seconds = last[3], now - last[2]
        s = self.sums[n > 0]
        for i, v in enumerate((1.0, float(len(ctx.tokens) - last[1]), seconds)):
            s[i] = self.decay * s[i] + v
        b = self.by_size.setdefault(n, [0.0, 0.0])
        ref = b if b[0] > 0 else self.by_size.get(0)  # a size's first step: against the plain steps
        if ref is not None and ref[0] > 0:
            seconds = min(seconds, CLIP * ref[1] / ref[0])
        b[0], b[1] = self.decay * b[0] + 1.0, self.decay * b[1] + seconds

    def rates(self) -> tuple[float, float] | None:
        """(tau, step_ratio) from the decayed sums, or None before both kinds were measured."""
        (ds, dt, dsec), (ps, _pt, psec) = self.sums[True], self.sums[False]
        if ds <= 0 or ps <= 0 or psec <= 0:
            return None
        return dt / ds, (dsec / ds) / (psec / ps)

    def begin(self, ctx) -> None:
        """Start timing this step (a plain one until ``drafted``), recording the previous one."""
        now = self.clock()
        self._record(ctx, now)
        self._last = (ctx.tokens, len(ctx.tokens), now, 0)

    def chose(self, plain: bool) -> bool:
        """This step is plain by auto k's choice (``plain``) or drafts."""
        self.chose_plain = plain
        self.plain_run = self.plain_run + 1 if plain else 0
        return plain

    def plain(self, ctx) -> bool:
        self.begin(ctx)
        plain = False
        if ctx.spec.k == "auto" and ctx.budget > 0 and self.sums[True][0] > 0:
            rates = self.rates()
            if rates is None:
                plain = self.sums[False][0] == 0  # measure one plain step
                if plain:
                    self.probe.plain()
            else:
                plain = not self.probe.drafts(drafting_pays(*rates))
        return self.chose(plain)

    def drafted(self, n: int) -> None:
        if self._last is not None and n > 0:
            self._last = self._last[:3] + (n,)

    def skip(self) -> None:
        if self._last is not None:
            self._last = self._last[:3] + (None,)


class TreeState:
    """One request's auto-k state for a tree method: see the module docstring."""

    def __init__(self) -> None:
        self.fallback = PlainFallback()

    @property
    def chose_plain(self) -> bool:
        return self.fallback.chose_plain
