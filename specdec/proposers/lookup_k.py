"""Auto k for prompt lookup: how many of a match's tokens to draft, from measured acceptance and cost.

Why: drafting a whole match (up to 8 tokens) whenever an n-gram matches made lookup slower than
plain decoding on the language server's block-mode replay (docs/lsp.md): most matches there are
wrong at once, and a missed 8-token draft still pays a verification forward over 9 rows. Lookup's
acceptance is bursty (a copy that is right tends to stay right for many tokens; a fresh match is
often wrong at its first token), so one i.i.d. alpha undervalues long copies and overvalues fresh
ones. The rule therefore uses per-position conditional acceptance, kept apart for two states, and
the measured cost of a step per draft size.

Contract:
- ``CopyTracker``: every step remembers the continuation its match offered (up to the cap, drafted
  or not, with the step's state) and compares it on later calls with the tokens committed since:
  position i is *tested* when positions < i matched and the token at i is known, *accepted* when it
  matched too. A deterministic draft token x is accepted exactly when the verifier commits x (with
  probability p(x)); when nothing was drafted the committed token is x with the same probability
  p(x). So continuations that were not drafted measure acceptance as well as drafted ones, and plain
  steps keep it measured. Counts decay (``DECAY``) per position and are kept per state: ``copy``
  when the previous step's continuation matched every token committed since, else ``fresh``.
  ``alphas(state)``: alpha_i = P(accept i | positions < i accepted, state), with a prior.
- ``step_costs(by_size, cap)``: r(n), the wall time of a step drafting n tokens over a plain one's,
  from ``PlainFallback.by_size`` (whole steps, propose to propose: scoring, verification, commit):
  r(0) = 1 and, for n >= 1, the line r0 + v n fitted (``theory.fit_verify_cost``, weighted by
  steps) to the mean of every size with at least ``MIN_STEPS`` (decayed) steps. A line, not each
  size's own mean: the means of rarely drafted sizes are noisy, and a size that once measured slow
  would never be drafted again to correct it. The free intercept keeps a jump at n = 1 (a wider
  forward that leaves a one-row fast path); v >= 0; ``PRIOR_V`` before anything is measured.
- ``choose_k(alphas, costs, cap, plain_run)``: the k in [1, cap] maximising E(k) / r(k), E(k) =
  1 + sum_{j<=k} prod_{i<=j} alpha_i (``theory.expected_tokens_per_position``), when it beats a
  plain step (E(0) = r(0) = 1); else 0, except that every ``PROBE_EVERY``-th chosen plain step in a
  row drafts that best k, so its cost stays measured.
- ``LookupAuto``: the state of one proposer object. ``choose(ctx, cont) -> k`` for a match offering
  ``cont`` (empty: no match, a plain step that is not auto k's choice); ``drafted(n)`` after it;
  ``chose_plain``; ``skip()`` (a step ran without a call); ``carried()`` (a batch row's copy: the
  measurements, no request). Acceptance and costs carry across requests (they describe the text
  and the machine); the run of plain steps and the remembered continuations belong to one request
  (a new token list starts them afresh; the old request's continuations are scored first).
Exactness: k depends only on committed tokens and past timings, and a deterministic draft of any
length is verified exactly; only the speed changes.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence

from specdec.core.seq import common_prefix
from specdec.core.theory import fit_verify_cost
from specdec.proposers.draft import PROBE_EVERY
from specdec.proposers.fallback import PlainFallback

DECAY = 0.95  # per tested position: about the last 20 tests of each position count
PRIOR_ALPHA, PRIOR_WEIGHT = 0.6, 1.0  # the prior of every alpha_i, worth one test
PRIOR_V = 0.07  # r(n) = 1 + 0.07 n before steps are timed: a missed 8-token draft cost 1.56x (docs/lsp.md)
MIN_STEPS = 2.0  # decayed steps of a size before its mean enters the fit
STATES = ("fresh", "copy")


def step_costs(by_size: dict[int, list[float]], cap: int, prior_v: float = PRIOR_V) -> list[float]:
    """[r(0), ..., r(cap)] from per-size [steps, seconds]: r(0) = 1, and a drafting step on the line
    r0 + v n fitted to the sizes measured at least ``MIN_STEPS`` times (weighted by their steps)."""
    plain = by_size.get(0)
    pts = []
    if plain and plain[0] >= MIN_STEPS and plain[1] > 0:
        t0 = plain[1] / plain[0]
        pts = [(n, s[1] / s[0] / t0, s[0]) for n, s in sorted(by_size.items()) if n > 0 and s[0] >= MIN_STEPS]
    r0, v = 1.0, prior_v  # nothing measured yet
    if len(pts) == 1:  # one size: the prior slope through it
        r0 = pts[0][1] - prior_v * pts[0][0]
    elif pts:
        r0, v = fit_verify_cost(*zip(*pts))
        if v < 0:  # never extrapolate a falling cost: the sizes' mean
            r0, v = sum(r * w for _, r, w in pts) / sum(w for *_, w in pts), 0.0
    return [1.0] + [max(1e-3, r0 + v * n) for n in range(1, cap + 1)]


def choose_k(
    alphas: Sequence[float], costs: Sequence[float], cap: int, plain_run: int = 0, probe_every: int = PROBE_EVERY
) -> int:
    """The k in [1, cap] with the most expected tokens per unit of step time if that beats a plain
    step, else 0 (but the best k on every ``probe_every``-th plain step in a row)."""
    best, rate, e, reach = 0, 0.0, 1.0, 1.0
    for k in range(1, cap + 1):  # e = E(k), theory.expected_tokens_per_position(alphas[:k]), grown by one term
        reach *= alphas[k - 1]
        e += reach
        if e / costs[k] > rate:
            best, rate = k, e / costs[k]
    if rate > 1.0 or (best and plain_run + 1 >= probe_every):
        return best
    return 0


class CopyTracker:
    """Decayed per-position acceptance counts per state, scored from committed tokens."""

    def __init__(self, depth: int = 8, decay: float = DECAY) -> None:
        self.decay = decay
        self.tested = {s: [PRIOR_WEIGHT] * depth for s in STATES}
        self.accepted = {s: [PRIOR_WEIGHT * PRIOR_ALPHA] * depth for s in STATES}
        self._tokens: list[int] | None = None
        self._pending: list[tuple[int, list[int], str]] = []  # (start, continuation, state)

    def carried(self) -> CopyTracker:
        """A copy for another request: the counts (deep), no tokens or pending copies."""
        f = copy.copy(self)
        f.tested, f.accepted = copy.deepcopy(self.tested), copy.deepcopy(self.accepted)
        f.forget_tokens()
        return f

    def forget_tokens(self) -> None:
        """No tokens seen and no copies pending (another request follows)."""
        self._tokens, self._pending = None, []

    def alphas(self, state: str) -> list[float]:
        return [a / t for a, t in zip(self.accepted[state], self.tested[state])]

    def observe(self, tokens: list[int]) -> str:
        """Score the remembered continuations against ``tokens``; this step's state."""
        if tokens is not self._tokens:
            self.new_request(tokens)
            return "fresh"
        live = False
        keep = []
        for start, cont, state in self._pending:
            m, known = self._match(cont, start)
            live = bool(cont) and m == known  # the last one is the previous step's continuation
            if m == len(cont) or m < known:
                self._count(state, m, rejected=m < len(cont))
            else:
                keep.append((start, cont, state))
        self._pending = keep
        return "copy" if live else "fresh"

    def remember(self, tokens: list[int], cont: list[int], state: str) -> None:
        """This step's continuation (empty: no match) predicts the tokens after ``tokens``."""
        self._pending.append((len(tokens), list(cont), state))
        del self._pending[: -2 * len(self.tested["fresh"])]  # bounded (each resolves within 8 tokens anyway)

    def new_request(self, tokens: list[int] | None) -> None:
        """Score what the old request's final tokens tell (the rest is unknown), then follow ``tokens``."""
        for start, cont, state in self._pending:
            m, known = self._match(cont, start)
            if cont:
                self._count(state, m, rejected=m < known)
        self._tokens, self._pending = tokens, []

    def _match(self, cont: list[int], start: int) -> tuple[int, int]:
        """(matched prefix, tokens known) of a continuation that began at ``start``."""
        seen = self._tokens[start : start + len(cont)] if self._tokens is not None else []
        return common_prefix(cont, seen), len(seen)

    def _count(self, state: str, m: int, rejected: bool) -> None:
        t, a, d = self.tested[state], self.accepted[state], self.decay
        for i in range(min(m + rejected, len(t))):
            t[i] = d * t[i] + 1.0
            a[i] = d * a[i] + (i < m)


class LookupAuto:
    def __init__(self, clock=time.perf_counter, probe_every: int = PROBE_EVERY) -> None:
        self.copies = CopyTracker()
        self.steps = PlainFallback(clock=clock, probe_every=probe_every)  # step timing, run of plain steps

    @property
    def chose_plain(self) -> bool:
        return self.steps.chose_plain

    def choose(self, ctx, cont: list[int]) -> int:
        self.steps.begin(ctx)
        state = self.copies.observe(ctx.tokens)
        self.copies.remember(ctx.tokens, cont, state)
        if not cont:  # nothing to draft: a plain step auto k did not choose (the run goes on)
            self.steps.chose_plain = False
            return 0
        costs = step_costs(self.steps.by_size, len(cont))
        k = choose_k(self.copies.alphas(state), costs, len(cont), self.steps.plain_run, self.steps.probe_every)
        self.steps.chose(k == 0)
        return k

    def drafted(self, n: int) -> None:
        self.steps.drafted(n)

    def skip(self) -> None:
        self.steps.skip()

    def carried(self) -> LookupAuto:
        f = copy.copy(self)
        f.steps = self.steps.carried()
        f.copies = self.copies.carried()
        return f
