"""specdec.core.verify: exact-distribution tests, temperature-0 tables and edge cases.

The exact-distribution tests drive the real ``verify`` in a little decoding loop against a bigram
"model": the target's next-token row after token a is P[a] and the draft's is Q[a], so every p and
q row is the true conditional for its prefix. Exact speculative decoding must then emit a token
stream distributed as the Markov chain P started at the pending token. We collect the stream of
many seeded trials and compare the joint of consecutive emitted tokens (t, t+1) with the exact
joint (P^t)[pending, a] * P[a, b] in total variation. The bound is 2.5 times the TV that pure
multinomial noise gives on average for that many trials (so it tightens as trials grow), and the
teeth test shows that plausible wrong verifiers land far above it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
import torch

from specdec.core.sampling import sample, to_probs
from specdec.core.tree import Draft
from specdec.core.verify import Verdict, residual, verify

V = 5
PENDING = 0
Step = Callable[[int], list[int]]  # pending token -> tokens emitted by one decoding step


def emitted(verdict: Verdict, draft: Draft) -> list[int]:
    """The tokens a step emits: the accepted draft tokens, then the verdict's token."""
    return [int(t) for t in draft.tokens[list(verdict.path)].tolist()] + [verdict.token]


def rejected_nodes(verdict: Verdict) -> tuple[int, ...]:
    """Node indices tested and rejected, in test order."""
    return tuple(node for node, _, _, ok in verdict.tested if not ok)


def _bigram(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits, dim=-1)


_G = torch.Generator().manual_seed(2024)
P = _bigram(1.5 * torch.randn(V, V, generator=_G))  # target p(next | last token)
Q = _bigram(P.log() + 1.0 * torch.randn(V, V, generator=_G))  # a draft q that is close, not equal


def _cum(rows: torch.Tensor) -> list[list[float]]:
    return rows.double().cumsum(dim=-1).tolist()


Q_CUM = _cum(Q)


def _draw(rng: random.Random, cum: list[float]) -> int:
    return rng.choices(range(len(cum)), cum_weights=cum)[0]


def _stream(step: Step, n_trials: int, n_tokens: int) -> torch.Tensor:
    """[n_trials, n_tokens]: the first n_tokens emitted by a loop of steps from PENDING."""
    out = torch.empty(n_trials, n_tokens, dtype=torch.long)
    for trial in range(n_trials):
        tokens: list[int] = []
        while len(tokens) < n_tokens:
            tokens += step(tokens[-1] if tokens else PENDING)
        out[trial] = torch.tensor(tokens[:n_tokens])
    return out


def _exact_pair(t: int) -> torch.Tensor:
    """Exact joint [V, V] of emitted tokens t and t+1 (1-based) for the Markov chain P."""
    p64 = P.double()
    marginal = torch.linalg.matrix_power(p64, t)[PENDING]
    return marginal[:, None] * p64


def _tv(samples: torch.Tensor, exact: torch.Tensor) -> float:
    counts = torch.bincount(samples, minlength=exact.numel()).double()
    return 0.5 * (counts / samples.numel() - exact.flatten()).abs().sum().item()


def _tv_bound(exact: torch.Tensor, n: int) -> float:
    """2.5 x E[TV] of n multinomial draws from ``exact`` (E|N(0, s^2)| = s * sqrt(2/pi))."""
    sd = (exact * (1 - exact) / n).sqrt()
    return 2.5 * 0.5 * (sd * math.sqrt(2 / math.pi)).sum().item()


def _pair_tvs(streams: torch.Tensor) -> list[tuple[float, float]]:
    """(TV, bound) for every consecutive pair of emitted tokens in the streams."""
    n_trials, n_tokens = streams.shape
    result = []
    for t in range(1, n_tokens):
        exact = _exact_pair(t)
        codes = streams[:, t - 1] * V + streams[:, t]
        result.append((_tv(codes, exact), _tv_bound(exact, n_trials)))
    return result


def _assert_exact(streams: torch.Tensor) -> None:
    first = P[PENDING].double()
    tv1, bound1 = _tv(streams[:, 0], first), _tv_bound(first, streams.shape[0])
    assert tv1 < bound1, f"first token: TV {tv1:.4f} >= bound {bound1:.4f}"
    for t, (tv, bound) in enumerate(_pair_tvs(streams), start=1):
        assert tv < bound, f"tokens ({t}, {t + 1}): TV {tv:.4f} >= bound {bound:.4f}"


# -- steps of the loop (each one real verify call) -----------------------------------------------


Verifier = Callable[[Draft, torch.Tensor, torch.Generator], list[int]]  # -> emitted tokens


def _real(draft: Draft, p: torch.Tensor, gen: torch.Generator) -> list[int]:
    return emitted(verify(draft, p, gen), draft)


def _chain_with_q_step(k: int, seed: int, verifier: Verifier = _real) -> Step:
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)

    def step(pending: int) -> list[int]:
        xs = [pending]
        for _ in range(k):  # x_i ~ q(. | prefix): the draft's own autoregressive sampling
            xs.append(_draw(rng, Q_CUM[xs[-1]]))
        draft = Draft.chain(torch.tensor(xs[1:]), q=Q[xs[:-1]])
        return verifier(draft, P[xs], gen)

    return step


def _fixed_draft_step(draft: Draft, seed: int) -> Step:
    """A deterministic draft (q=None) with fixed tokens, as prompt lookup or Medusa propose."""
    gen = torch.Generator().manual_seed(seed)
    tokens = draft.tokens.tolist()

    def step(pending: int) -> list[int]:
        return emitted(verify(draft, P[[pending, *tokens]], gen), draft)

    return step


def _sampled_tree_step(seed: int) -> Step:
    """Two root siblings drawn independently from q(. | pending), each with one drawn child."""
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)

    def step(pending: int) -> list[int]:
        a, b = _draw(rng, Q_CUM[pending]), _draw(rng, Q_CUM[pending])
        tokens = [a, b, _draw(rng, Q_CUM[a]), _draw(rng, Q_CUM[b])]
        draft = Draft.from_parents(tokens, [-1, -1, 0, 1], q=Q[[pending, pending, a, b]])
        return emitted(verify(draft, P[[pending, *tokens]], gen), draft)

    return step


# -- exact-distribution tests ---------------------------------------------------------------------


def test_chain_with_q_is_exact() -> None:
    """Leviathan et al. Algorithm 1 with k = 3: tokens 1..4 (bonus included) follow P."""
    _assert_exact(_stream(_chain_with_q_step(k=3, seed=1), n_trials=20_000, n_tokens=4))


def test_deterministic_chain_is_exact() -> None:
    """q=None (prompt lookup): a fixed draft [2, 1, 3] still yields a stream distributed as P."""
    _assert_exact(_stream(_fixed_draft_step(Draft.chain([2, 1, 3]), seed=2), 20_000, 4))


def test_deterministic_tree_is_exact() -> None:
    """Medusa / EAGLE candidates: 3 root children, 3 children each, siblings tried in order."""
    tokens = [0, 1, 2, 1, 3, 4, 0, 2, 4, 3, 0, 1]
    parents = [-1, -1, -1, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    step = _fixed_draft_step(Draft.from_parents(tokens, parents), seed=3)
    _assert_exact(_stream(step, n_trials=20_000, n_tokens=3))


def test_sampled_tree_is_exact() -> None:
    """Stochastic siblings (each drawn from its q) with sibling-wise residuals (SpecInfer)."""
    _assert_exact(_stream(_sampled_tree_step(seed=4), n_trials=15_000, n_tokens=3))


def test_the_tv_check_has_teeth() -> None:
    """Plausible wrong verifiers fail the same check by a wide margin."""

    def accept_always(draft: Draft, p: torch.Tensor, gen: torch.Generator) -> list[int]:
        return draft.tokens.tolist() + [sample(p[-1], gen)]

    def no_residual(draft: Draft, p: torch.Tensor, gen: torch.Generator) -> list[int]:
        assert draft.q is not None  # right acceptance test, but resample from p, not max(p - q, 0)
        out: list[int] = []
        for i, x in enumerate(draft.tokens.tolist()):
            if torch.rand((), generator=gen).item() >= p[i, x] / draft.q[i, x]:
                return out + [sample(p[i], gen)]
            out.append(x)
        return out + [sample(p[-1], gen)]

    for wrong in (accept_always, no_residual):
        streams = _stream(_chain_with_q_step(k=3, seed=5, verifier=wrong), 10_000, 3)
        worst = max(tv / bound for tv, bound in _pair_tvs(streams))
        assert worst > 3.0, f"{wrong.__name__}: TV only {worst:.2f} x the bound"


# -- temperature 0 ---------------------------------------------------------------------------------

GREEDY_V = 8


def _one_hot_rows(argmaxes: list[int], seed: int) -> torch.Tensor:
    """to_probs(temperature=0) of random logits whose argmax per row is given."""
    logits = torch.randn(len(argmaxes), GREEDY_V, generator=torch.Generator().manual_seed(seed))
    logits[range(len(argmaxes)), argmaxes] = 10.0
    return to_probs(logits, temperature=0.0)


GREEDY_CASES = [
    # tokens, parents, argmax of p rows, path, token, kind, rejected
    ([3, 1, 4], [-1, 0, 1], [3, 1, 4, 6], (0, 1, 2), 6, "bonus", ()),
    ([3, 1, 4], [-1, 0, 1], [3, 2, 4, 6], (0,), 2, "recovered", (1,)),
    ([3, 1, 4], [-1, 0, 1], [5, 1, 4, 6], (), 5, "recovered", (0,)),
    ([], [], [7], (), 7, "plain", ()),
    ([2, 5, 6, 1], [-1, -1, 0, 1], [5, 7, 1, 7, 0], (1, 3), 0, "bonus", (0,)),
    ([2, 5, 6, 7], [-1, -1, 1, 1], [5, 7, 3, 7, 7], (1,), 3, "recovered", (0, 2, 3)),
]


@pytest.mark.parametrize("with_q", [False, True], ids=["q=None", "q one-hot"])
@pytest.mark.parametrize(("tokens", "parents", "argmaxes", "path", "token", "kind", "rejected"), GREEDY_CASES)
def test_greedy_table(
    tokens: list[int],
    parents: list[int],
    argmaxes: list[int],
    path: tuple[int, ...],
    token: int,
    kind: str,
    rejected: tuple[int, ...],
    with_q: bool,
) -> None:
    q = _one_hot_rows(tokens, seed=9) if with_q and tokens else None
    draft = Draft.from_parents(tokens, parents, q=q)
    gen = torch.Generator().manual_seed(0)
    state = gen.get_state()
    verdict = verify(draft, _one_hot_rows(argmaxes, seed=len(tokens)), gen)
    got = (verdict.path, verdict.token, verdict.kind, rejected_nodes(verdict))
    assert got == (path, token, kind, rejected)
    assert verdict.bonus == (kind == "bonus")
    assert all((r_x, q_x) == (float(ok), 1.0) for _, r_x, q_x, ok in verdict.tested)
    assert torch.equal(gen.get_state(), state), "greedy verification consumed randomness"


# -- edge cases -----------------------------------------------------------------------------------


def test_residual() -> None:
    r, q = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.5, 0.3])
    assert torch.allclose(residual(r, q), torch.tensor([1.0, 0.0, 0.0]))
    assert torch.equal(residual(r, r), r)  # zero mass: r == q, fall back to r
    assert torch.equal(residual(r * (1 - 1e-7), r), r * (1 - 1e-7))  # r a rounding below q


def test_all_accepted_when_q_equals_p_gives_bonus_without_draws() -> None:
    p = torch.softmax(torch.randn(4, V, generator=torch.Generator().manual_seed(6)), dim=-1)
    xs = [sample(p[i], torch.Generator().manual_seed(i)) for i in range(3)]
    draft = Draft.chain(xs, q=p[:3])
    verdict = verify(draft, p, torch.Generator().manual_seed(11))
    assert verdict.path == (0, 1, 2) and verdict.kind == "bonus" and rejected_nodes(verdict) == ()
    assert [ok for *_, ok in verdict.tested] == [True] * 3
    # r(x) >= q(x) everywhere, so no uniform was drawn: the one draw is the bonus from p[3].
    assert verdict.token == sample(p[3], torch.Generator().manual_seed(11))


def test_zero_mass_residual_in_verify() -> None:
    """Force the guarded branch: r(x) = q(x) / 2 everywhere, so max(r - q, 0) == 0."""
    q = torch.tensor([[0.0, 0.6, 0.4, 0.0, 0.0]])
    p = torch.cat([0.5 * q, torch.full((1, V), 1.0 / V)])
    kinds = set()
    for seed in range(40):
        verdict = verify(Draft.chain([1], q=q), p, torch.Generator().manual_seed(seed))
        kinds.add(verdict.kind)
        assert verdict.kind == "bonus" or verdict.token in (1, 2)  # drawn from r = p[0], no NaN
    assert kinds == {"bonus", "recovered"}


def test_rejected_sibling_hands_its_mass_to_the_next() -> None:
    p = torch.tensor([[0.5, 0.3, 0.2, 0.0, 0.0]] + [[0.2] * V] * 2)
    draft = Draft.from_parents([0, 1], [-1, -1])  # two deterministic candidates for one position
    for seed in range(100):
        verdict = verify(draft, p, torch.Generator().manual_seed(seed))
        if rejected_nodes(verdict)[:1] == (0,):
            break
    assert verdict.tested[0] == (0, 0.5, 1.0, False)
    assert verdict.tested[1][:3] == (1, pytest.approx(0.6), 1.0)  # r = (0, .3, .2) / 0.5


def test_empty_draft_is_a_plain_step() -> None:
    p = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0]])
    verdict = verify(Draft.empty(), p, torch.Generator().manual_seed(0))
    assert verdict == Verdict((), verdict.token, False, ()) and verdict.kind == "plain"
    assert verdict.token == sample(p[0], torch.Generator().manual_seed(0))
    assert emitted(verdict, Draft.empty()) == [verdict.token]


def test_bad_inputs_raise() -> None:
    p = torch.full((3, V), 1.0 / V)
    with pytest.raises(ValueError, match="p must have shape"):
        verify(Draft.chain([1]), p)
    with pytest.raises(ValueError, match="token ids"):
        verify(Draft.chain([1, V]), p)
    with pytest.raises(ValueError, match="q\\(x\\) = 0"):
        verify(Draft.chain([1, 2], q=torch.eye(V)[[0, 2]]), p)
    with pytest.raises(ValueError, match="V="):
        verify(Draft.chain([1, 2], q=torch.full((2, V + 1), 1.0 / (V + 1))), p)
