"""Speculation that adapts to load: one draft cap k per step for the batch's chain rows.

Contract: ``LoadPolicy(k_choices)``. ``observe_forward(rows, q, ms)`` records a target forward
over ``rows`` rows of ``q`` query tokens each (every row is padded to the longest, so one step's
cost is a function of (rows, q)); ``observe_row(method, tested, accepted, drafted, propose_ms,
cap)`` records one row's step. ``choose(methods, k_max) -> k`` returns the cap in ``k_choices`` (0 = a
plain step for everyone) that maximises the estimated batch tokens per second

    sum_i E_i(k) / (T(rows, 1 + k) + sum_i k c_i),   E_i(k) = 1 + sum_{j<=k} r_i(j) prod_{d<=j} a_i(d)

with a_i(d) the method's measured acceptance at draft depth d given that depth d was tested
(decayed counts per depth; ``observe_row`` derives them from a chain's tested and accepted
counts), r_i(j) the measured share of steps that drafted at least j tokens when the cap allowed j
(prompt lookup drafts nothing without a match, the draft model stops where its own q is unsure:
``confidence``; a capped row drafts the cap, its method's own auto k does not choose again under
it: ``rows.Row.spec_for``), c_i its measured propose cost per drafted token, and T the forward
cost. Per depth, because prompt lookup's acceptance is bursty (a copy is right for many tokens or
wrong at once: a_i(1) is its lowest), which the i.i.d. alpha of Leviathan et al. undervalues,
capping lookup's long copies (round four in docs/batching.md). A depth never measured takes the deepest measured depth's
figures (the prior ``PRIOR_ALPHA`` and r = 1 before any). T is the EWMA measured
at (rows, q) when there is one, else a least-squares line in rows * q through what was measured.
k = 0 is always a candidate and its estimate comes from the same table, so the policy picks
drafting only where it is estimated to beat not drafting. The estimate is then checked against
what steps really gave: ``observe_step(rows, tokens, ms)`` keeps the realised tokens per ms of
whole steps (propose to events) at each row count, drafted and plain apart; where drafted steps
realised less than plain ones at this row count (or, not measured there yet, at the nearest
count within a quarter that was: ``realised_at``), ``choose`` returns 0 (``last["guard"]``), and
every ``EXPLORE`` steps, half-way between the drafting probes, one step is plain so both rates
stay measured. This is what keeps the policy from being slower than not speculating when the
cost model misses a cost (e.g. per-row work that grows with k). Every ``EXPLORE`` steps the
smallest k > 0 is tried once so the first depth's acceptance and the propose cost stay measured
at the least cost (exploring with the largest k cost a full batch a k = 8 step every 32); deeper
depths are measured whenever the policy drafts that deep. ``calibrate(time_fn, rows_max)`` seeds T
at start (rows 1 and rows_max, q 1 and 1 + max k; the scheduler times a ``BatchTarget`` with
half-full slots, ``threads.time_rows``, so attention over a real prefix is in the cost);
``cap_rows`` applies a choice to a step's rows.
Tree methods (Medusa, EAGLE: ``TREES``) with k = "auto" get a binary choice, their own tree or a
plain step: their trees are not chains, so the per-depth model above does not price them, but
the realised rates do. With chain rows in the step they follow the chain choice (draft when k > 0);
alone, ``tree_step(rows)`` drafts unless the realised rate of drafted steps at this row count is
below that of plain ones, with the same probes (a plain step half-way between drafting ones, a
drafting step every ``EXPLORE``), so a full batch of tree rows stops drafting where it stops paying.
Exactness never depends on any of this: k only bounds what is drafted.
"""

from __future__ import annotations

from collections import Counter

PRIOR_ALPHA = 0.6
EXPLORE = 32
DEPTH_DECAY = 0.98  # per row step: deep depths are reached rarely, so they need a longer memory
ADAPTIVE = ("draft", "lookup")  # chain methods whose k = "auto" the policy caps
TREES = ("medusa", "eagle")  # tree methods whose k = "auto" the policy may turn into a plain step


def expected_tokens_by_depth(accept: list[float], drafted: list[float], k: int) -> float:
    """1 + sum_{j<=k} drafted[j] prod_{d<=j} accept[d] (lists indexed from depth 1 at 0; a depth
    past a list's end takes its last entry). With accept = [a] * k and drafted = [1] * k it is
    ``theory.expected_tokens(a, k)``, the i.i.d. geometric run."""
    total, run = 1.0, 1.0
    for j in range(k):
        run *= accept[min(j, len(accept) - 1)]
        total += run * drafted[min(j, len(drafted) - 1)]
    return total


class DepthCounts:
    """Decayed per-depth counts of one chain method: tested / accepted at each depth, and steps
    whose cap allowed depth j / that drafted at least j tokens."""

    def __init__(self, depths: int = 8) -> None:
        self.tested, self.accepted = [0.0] * depths, [0.0] * depths
        self.allowed, self.drafted = [0.0] * depths, [0.0] * depths

    def observe(self, tested: int, accepted: int, drafted: int, cap: int) -> None:
        pairs = ((self.tested, tested), (self.accepted, accepted), (self.allowed, cap), (self.drafted, drafted))
        for counts, n in pairs:
            for j in range(len(counts)):
                counts[j] = DEPTH_DECAY * counts[j] + (1.0 if j < n else 0.0)

    def rates(self) -> tuple[list[float], list[float]]:
        """(a(d), r(j)) per depth; an unmeasured depth repeats the deepest measured one's."""
        accept, share, a, r = [], [], PRIOR_ALPHA, 1.0
        for t, acc, n, d in zip(self.tested, self.accepted, self.allowed, self.drafted):
            a = acc / t if t > 1e-3 else a  # uniform decay keeps a ratio: any depth ever measured
            r = d / n if n > 1e-3 else r
            accept.append(a)
            share.append(r)
        return accept, share


class LoadPolicy:
    def __init__(self, k_choices: tuple[int, ...] = (0, 1, 2, 3, 4, 6, 8)) -> None:
        self.k_choices = tuple(sorted(set(k_choices) | {0}))
        self.cost: dict[tuple[int, int], float] = {}
        self.depths: dict[str, DepthCounts] = {}
        self.propose: dict[str, float] = {}  # ms per drafted token
        self.steps = 0
        self.last: dict = {}
        self.realised: dict[tuple[int, bool], float] = {}  # (rows, drafted?) -> tokens per ms, EWMA
        self.chosen: int | None = None

    def observe_forward(self, rows: int, q: int, ms: float) -> None:
        key = (rows, q)
        old = self.cost.get(key)
        self.cost[key] = ms if old is None else 0.8 * old + 0.2 * ms

    def observe_row(
        self, method: str, tested: int, accepted: int, drafted: int, propose_ms: float, cap: int | None = None
    ) -> None:
        """One row's step: its chain's tested / accepted / drafted counts and the cap it drafted
        under (``Row.cap``; None: not known, so the step tells nothing past what it drafted)."""
        if method in ADAPTIVE:
            counts = self.depths.setdefault(method, DepthCounts(max(self.k_choices)))
            counts.observe(tested, accepted, drafted, drafted if cap is None else cap)
        if drafted:
            per = propose_ms / drafted
            old = self.propose.get(method)
            self.propose[method] = per if old is None else 0.8 * old + 0.2 * per

    def observe_step(self, rows: int, tokens: int, ms: float) -> None:
        """A whole step's realised rate (every row's new tokens over the step's wall time, propose
        to events) under the cap ``choose`` gave last."""
        if self.chosen is None or ms <= 0:
            return
        key, rate = (rows, self.chosen > 0), tokens / ms
        old = self.realised.get(key)
        self.realised[key] = rate if old is None else 0.8 * old + 0.2 * rate

    def realised_at(self, rows: int) -> tuple[float | None, float | None]:
        """(plain, drafted) realised rates at ``rows``; where one is not measured there yet, those
        of the nearest row count within a quarter that has both. A batch that fills or drains
        meets each size for a few steps only (16 requests that end one by one), too few for the
        probes to measure every size, while neighbouring sizes cost nearly the same."""
        plain, drafted = self.realised.get((rows, False)), self.realised.get((rows, True))
        if plain is not None and drafted is not None:
            return plain, drafted
        both = [r for r, d in self.realised if d and (r, False) in self.realised and 4 * abs(r - rows) <= rows]
        if not both:
            return plain, drafted
        near = min(both, key=lambda r: (abs(r - rows), -r))
        return self.realised[(near, False)], self.realised[(near, True)]

    def depth_rates(self, method: str) -> tuple[list[float], list[float]]:
        """(a(d), r(j)) of a method (``DepthCounts.rates``); the prior before it was measured."""
        counts = self.depths.get(method)
        return counts.rates() if counts is not None else ([PRIOR_ALPHA], [1.0])

    def expected(self, method: str, k: int) -> float:
        return expected_tokens_by_depth(*self.depth_rates(method), k)

    def forward_ms(self, rows: int, q: int) -> float:
        if (rows, q) in self.cost:
            return self.cost[(rows, q)]
        pts = [(r * qq, ms) for (r, qq), ms in self.cost.items()]
        if not pts:
            return 1.0 + 0.1 * rows * q
        if len({x for x, _ in pts}) < 2:
            return pts[0][1]
        n = len(pts)
        mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
        var = sum((x - mx) ** 2 for x, _ in pts)
        b = max(0.0, sum((x - mx) * (y - my) for x, y in pts) / var)
        return max(1e-3, my + b * (rows * q - mx))

    def choose(self, methods: list[str], rows: int, k_max: int = 8) -> int:
        """The cap for this step's adaptive chain rows (``methods``: one entry per such row;
        ``rows``: all rows in the forward)."""
        self.steps += 1
        ks = [k for k in self.k_choices if k <= k_max]
        if self.steps % EXPLORE == 0:
            self.chosen = ks[1] if len(ks) > 1 else ks[0]
            return self.chosen
        if self.steps % EXPLORE == EXPLORE // 2:
            self.chosen = 0
            return 0
        best, best_rate = 0, -1.0
        rates = {}
        count = Counter(methods)  # each method's figures once, not once per row
        per = {m: self.depth_rates(m) for m in count}
        for k in ks:
            tokens = sum(n * expected_tokens_by_depth(*per[m], k) for m, n in count.items())
            ms = self.forward_ms(rows, 1 + k) + sum(n * k * self.propose.get(m, 0.0) for m, n in count.items())
            rates[k] = tokens / ms
            if rates[k] > best_rate * 1.0001:
                best, best_rate = k, rates[k]
        plain, drafted = self.realised_at(rows)
        guard = best > 0 and plain is not None and drafted is not None and drafted < plain
        if guard:  # the model says drafting pays, the measured steps at this size say it does not
            best = 0
        self.last = {"rows": rows, "k": best, "est_tok_per_ms": {k: round(r, 4) for k, r in rates.items()}}
        self.last["guard"] = guard
        self.chosen = best
        return best

    def tree_step(self, rows: int) -> bool:
        """For a step whose only adaptive rows are tree rows: True = their own tree, False = plain.
        The realised rates decide (``observe_step``), with ``choose``'s probes."""
        self.steps += 1
        plain, drafted = self.realised_at(rows)
        guard = plain is not None and drafted is not None and drafted < plain
        draft = self.steps % EXPLORE == 0 or (self.steps % EXPLORE != EXPLORE // 2 and not guard)
        self.last = {"rows": rows, "k": None if draft else 0, "guard": guard, "trees": True}
        self.chosen = int(draft)
        return draft

    def calibrate(self, time_fn, rows_max: int, repeats: int = 3) -> None:
        """Seed the cost table: ``time_fn(rows, q) -> ms`` at the corners."""
        q_max = 1 + max(self.k_choices)
        for rows in sorted({1, rows_max}):
            for q in (1, q_max):
                for _ in range(repeats):
                    self.observe_forward(rows, q, time_fn(rows, q))


def cap_rows(policy: LoadPolicy, live: list, n_rows: int) -> None:
    """One draft cap for the rows (``batch.rows.Row``) whose k is "auto" and whose method drafts
    a chain; for tree rows with k "auto", their own budget (cap None) or a plain step (0); the
    others keep their own k."""
    adaptive = [r for r in live if r.spec.k == "auto" and r.spec.method in ADAPTIVE]
    trees = [r for r in live if r.spec.k == "auto" and r.spec.method in TREES]
    if n_rows == 1:  # nothing shares the forward: the solo path's own k (each method's own fallback)
        for row in adaptive + trees:
            row.k_cap = None
        return
    draft = True
    if adaptive:
        k = policy.choose([r.spec.method for r in adaptive], n_rows)
        draft = k > 0
        for row in adaptive:
            row.k_cap = k
    if trees:
        draft = draft if adaptive else policy.tree_step(n_rows)
        for row in trees:
            row.k_cap = None if draft else 0
