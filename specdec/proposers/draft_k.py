"""The draft model's k rule and one request's drafting state, apart from the weights it drafts with.

Why: the draft model's weights and forwards serve every request, but its k rule reads state of a
request or of a stream of them: the acceptance estimate, the draft's step time, the run of plain
steps auto k chose and the request that run belongs to. The single-request proposer
(``draft.DraftModel``) keeps one ``DraftState``; every batch row holds its own, and both draft
through the same ``batch_draft.BatchDraft.propose``, which calls the same three methods on it, so
a row chooses k exactly as its solo run would (before, a batch row copied the whole proposer).

Contract:
- ``choose_k(alpha, c, k_max, plain_run)``: the k in [1, k_max] with the best expected speedup
  (1 - alpha^(k+1)) / ((1 - alpha)(k c + 1)) (``theory.optimal_k``) when it beats plain decoding,
  else 0, except that a probe drafts one token after a run of plain steps (``probe``, a
  ``fallback.ProbeBackoff``: the run doubles after each probe that left drafting unpaid, up to
  ``PROBE_MAX``, and spans requests; without one, the ``PROBE_EVERY``-th step of ``plain_run``).
- ``AcceptanceTracker``: decayed counts of accepted draft tokens and of rejections, inferred from
  the committed tokens (``remember`` a draft, ``observe`` the grown token list), ``alpha``.
- ``DraftState()``: ``tracker``, ``step_ms`` (one draft forward, ms, a moving average; None until
  measured), ``plain_run`` (plain steps auto k chose in a row in this request), ``chose_plain``,
  ``ids`` (the tokens its draft KV holds), ``slot`` (a batch row's KV slot in ``BatchDraft``'s
  ragged cache, None outside it), ``cache`` (the draft runner's cache of a state that is not the
  runner's live one, ``DraftModel.chain`` swaps them; None otherwise), ``probe`` (the probe
  schedule; it carries over requests, as the acceptance estimate does); ``forget()``: its KV
  holds nothing usable (the next call feeds every token).
  ``begin(ctx, verify_cost) -> k`` counts the last draft's outcome, starts a new request's plain
  run at 0 (another token list), and returns the request's k capped by the step's budget
  (``current_k``: a fixed k as given; auto: ``FIRST_K`` until alpha and c are measured, then
  ``choose_k`` with c = step_ms / ctx.target_ms + verify_cost); ``timed(ms)`` folds one forward's
  time in; ``end(ctx, drafted)`` remembers the draft for the next ``begin``.
"""

from __future__ import annotations

from specdec.core.proposer import Context
from specdec.core.seq import common_prefix
from specdec.core.theory import optimal_k
from specdec.proposers.fallback import PROBE_EVERY, ProbeBackoff

FIRST_K = 4  # drafted until alpha and c are measured (and the cap if a caller gives none)


def choose_k(alpha: float, c: float, k_max: int, plain_run: int = 0, probe: ProbeBackoff | None = None) -> int:
    """Auto k: the k in [1, k_max] with the best expected speedup (1 - alpha^(k+1)) /
    ((1 - alpha)(k c + 1)) when it beats plain decoding, else 0 (a plain step), except that a
    probe drafts one token after a run of plain steps (``probe``; by default every
    ``PROBE_EVERY``-th) so alpha keeps being measured."""
    k, _ = optimal_k(min(max(alpha, 0.0), 1.0), c, k_max)
    probe = probe or ProbeBackoff(PROBE_EVERY, PROBE_EVERY, since=plain_run)
    return max(k, 1) if probe.drafts(k > 0) else 0


class AcceptanceTracker:
    """Decayed counts of accepted draft tokens and of rejections, inferred from committed tokens."""

    def __init__(self, decay: float = 0.9, prior_alpha: float = 0.6) -> None:
        self.decay = decay
        self.accepted, self.rejections = prior_alpha * 2, (1 - prior_alpha) * 2
        self._last: tuple[list[int], int, list[int]] | None = None  # (token list, start, draft)

    def remember(self, tokens: list[int], drafted: list[int]) -> None:
        self._last = (tokens, len(tokens), drafted)

    def observe(self, committed: list[int]) -> None:
        """Count the outcome of the last draft; ``committed`` must be the same (grown) token list
        object the draft was made for, so a new request never scores an old request's draft."""
        if self._last is None:
            return
        same, start, drafted = self._last
        self._last = None
        if same is not committed or len(committed) <= start or not drafted:
            return
        m = common_prefix(drafted, committed[start:])
        full = m == len(drafted)
        self.accepted = self.decay * self.accepted + m
        self.rejections = self.decay * self.rejections + (0 if full else 1)

    @property
    def alpha(self) -> float:
        return self.accepted / max(1e-9, self.accepted + self.rejections)


class DraftState:
    """One request's (or one batch row's) drafting state: see the module docstring."""

    def __init__(self) -> None:
        self.tracker = AcceptanceTracker()
        self.step_ms: float | None = None
        self.plain_run = 0
        self.chose_plain = False
        self.request: list[int] | None = None  # the token list the plain run belongs to
        self.ids: list[int] = []  # the tokens its KV holds (the runner's cache, or its ragged slot)
        self.slot: int | None = None  # a batch row's KV slot in the batched draft (batch_draft.py)
        self.cache = None  # (runner, its cache) while another state's cache is the runner's live one
        self.probe = ProbeBackoff()

    def forget(self) -> None:
        self.ids = []

    def current_k(self, ctx: Context, verify_cost: float) -> int:
        if ctx.spec.k != "auto":
            return int(ctx.spec.k)
        if not ctx.target_ms or not self.step_ms:
            return min(FIRST_K, ctx.k_max or FIRST_K)
        c = self.step_ms / ctx.target_ms + verify_cost
        return choose_k(self.tracker.alpha, c, ctx.k_max or FIRST_K, self.plain_run, self.probe)

    def begin(self, ctx: Context, verify_cost: float) -> int:
        self.tracker.observe(ctx.tokens)
        if ctx.tokens is not self.request:  # a new request: its run of plain steps starts at 0
            self.request, self.plain_run = ctx.tokens, 0
        k = min(self.current_k(ctx, verify_cost), ctx.budget)
        self.chose_plain = ctx.spec.k == "auto" and k <= 0 < ctx.budget
        self.plain_run = self.plain_run + 1 if self.chose_plain else 0
        return k

    def timed(self, ms: float) -> None:
        self.step_ms = ms if self.step_ms is None else 0.8 * self.step_ms + 0.2 * ms

    def end(self, ctx: Context, drafted: list[int]) -> None:
        self.tracker.remember(ctx.tokens, drafted)
