"""Step events: what the engine tells its front ends, one event per speculative step.

Contract: pure data, no torch. A ``Piece`` is one token with its fate, named as in vLLM:
``accepted`` (a draft token the target kept), ``rejected`` (a draft token the target refused; it is
never part of the output), ``recovered`` (the token sampled from the residual after a rejection),
``bonus`` (the extra token sampled from p after every draft token passed) and ``plain`` (the one
token of a step that drafted nothing: the baseline). The output text is the concatenation of the
``text`` of every piece whose ``emitted`` is True, in order. ``to_dict()`` gives JSON-ready values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Kind = Literal["accepted", "rejected", "recovered", "bonus", "plain"]
EMITTED_KINDS = frozenset({"accepted", "recovered", "bonus", "plain"})


@dataclass(frozen=True)
class Piece:
    """One token and its fate. ``position`` is its draft depth (1-based; 0 for plain tokens),
    ``p`` and ``q`` the target and draft probabilities of the token when it was tested (None
    where not applicable), ``text`` its stable text (rejected tokens: decoded on their own)."""

    token_id: int
    text: str
    kind: Kind
    step: int
    position: int
    p: float | None = None
    q: float | None = None

    @property
    def emitted(self) -> bool:
        return self.kind in EMITTED_KINDS

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Stats:
    """Running counters. Two acceptance rates (docs/theory-speedup.md defines both):
    alpha = accepted / drafted (vLLM's "acceptance rate"); alpha_tested = accepted / tested
    (Leviathan et al.'s per-token acceptance probability, the alpha of the i.i.d. formula
    E = (1 - alpha^(k+1)) / (1 - alpha)). tau = emitted tokens / target forwards (counting the
    recovered or bonus token, so the baseline has tau = 1; vLLM's "mean acceptance length")."""

    steps: int = 0
    target_forwards: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    elapsed_s: float = 0.0
    prefill_s: float = 0.0
    drafted_at: list[int] = field(default_factory=list)
    tested_at: list[int] = field(default_factory=list)
    accepted_at: list[int] = field(default_factory=list)
    auto_plain: int = 0  # steps where auto k chose plain decoding (k = 0): drafting did not pay

    @property
    def alpha(self) -> float | None:
        """accepted / drafted: vLLM's "acceptance rate". Tokens drafted after the first rejection
        are never tested, so under i.i.d. acceptance a this is a (1 - a^k) / (k (1 - a)), not a
        (0.59 at a = 0.8, k = 4): do not put it into the i.i.d. formula; use ``alpha_tested``."""
        return self.accepted / self.drafted if self.drafted else None

    @property
    def alpha_tested(self) -> float | None:
        """accepted / tested: the probability that a draft token the verifier tested is accepted,
        Leviathan et al.'s alpha (section 3.1) and the one ``theory.expected_tokens`` takes. None
        when nothing was tested."""
        tested = sum(self.tested_at)
        return sum(self.accepted_at) / tested if tested else None

    @property
    def tau(self) -> float | None:
        return self.emitted / self.target_forwards if self.target_forwards else None

    @property
    def tokens_per_s(self) -> float | None:
        return self.emitted / self.elapsed_s if self.elapsed_s > 0 else None

    @property
    def alpha_per_position(self) -> list[float | None]:
        """alpha_i = accepted / drafted tokens at draft position (depth) i."""
        return [a / d if d else None for a, d in zip(self.accepted_at, self.drafted_at)]

    @property
    def conditional_alpha_per_position(self) -> list[float | None]:
        """P(accept at depth i | the verifier reached depth i): the alpha of the i.i.d. theory."""
        return [a / t if t else None for a, t in zip(self.accepted_at, self.tested_at)]

    def record(self, drafted: list[int], tested: list[int], accepted: list[int], emitted: int) -> None:
        """Count one target forward; the lists hold the depths (1-based) of the draft nodes
        that were drafted, that the verifier tested, and that it accepted."""
        self.steps += 1
        self.target_forwards += 1
        self.drafted += len(drafted)
        self.accepted += len(accepted)
        self.emitted += emitted
        for depths, counts in ((drafted, self.drafted_at), (tested, self.tested_at), (accepted, self.accepted_at)):
            for d in depths:
                self.grow_to(d)
                counts[d - 1] += 1

    def grow_to(self, depth: int) -> None:
        """The per-depth counters cover depths 1..``depth`` (zeros added)."""
        while len(self.drafted_at) < depth:
            self.drafted_at.append(0)
            self.tested_at.append(0)
            self.accepted_at.append(0)

    @classmethod
    def total(cls, stats: list[Stats]) -> Stats:
        """The sum of several runs' counters (ratios are then ratios of sums)."""
        out = cls()
        for s in stats:
            for f in (
                "steps",
                "target_forwards",
                "drafted",
                "accepted",
                "emitted",
                "elapsed_s",
                "prefill_s",
                "auto_plain",
            ):
                setattr(out, f, getattr(out, f) + getattr(s, f))
            out.grow_to(len(s.drafted_at))
            for mine, theirs in (
                (out.drafted_at, s.drafted_at),
                (out.tested_at, s.tested_at),
                (out.accepted_at, s.accepted_at),
            ):
                for i, v in enumerate(theirs):
                    mine[i] += v
        return out

    def snapshot(self) -> Stats:
        return Stats(
            self.steps,
            self.target_forwards,
            self.drafted,
            self.accepted,
            self.emitted,
            self.elapsed_s,
            self.prefill_s,
            list(self.drafted_at),
            list(self.tested_at),
            list(self.accepted_at),
            self.auto_plain,
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            alpha=self.alpha,
            alpha_tested=self.alpha_tested,
            tau=self.tau,
            tokens_per_s=self.tokens_per_s,
            alpha_per_position=self.alpha_per_position,
            conditional_alpha_per_position=self.conditional_alpha_per_position,
        )
        return d


@dataclass(frozen=True)
class StepEvent:
    """One engine step: its pieces in display order, the stop reason if the generation ended
    in this step (``eos``, ``length``, ``context``), timings in milliseconds and a stats snapshot.
    ``verifier`` is the verifier's record when the request asked for it (``GenerateSpec.
    verifier_record``; built by ``specdec/core/record.py``): JSON-ready, {"nodes": [...], "final": {...}}.
    ``logp``: the target's raw log-probability of each emitted token, in order (``engine/
    confidence.py``), or empty where the step does not report it (healing, other backends).
    ``top_logp``: for each emitted token, the ``GenerateSpec.top_logprobs`` most likely tokens of
    the same raw distribution as ``(token_id, log-probability)``, most likely first (empty unless
    asked: the OpenAI API's ``logprobs`` / ``top_logprobs``)."""

    step: int
    pieces: tuple[Piece, ...]
    stats: Stats
    timings_ms: dict[str, float]
    draft_size: int
    stop: str | None = None
    verifier: dict[str, Any] | None = None
    logp: tuple[float, ...] = ()
    top_logp: tuple[tuple[tuple[int, float], ...], ...] = ()

    @property
    def emitted(self) -> tuple[Piece, ...]:
        return tuple(pc for pc in self.pieces if pc.emitted)

    @property
    def text(self) -> str:
        return "".join(pc.text for pc in self.pieces if pc.emitted)

    @property
    def token_ids(self) -> list[int]:
        return [pc.token_id for pc in self.pieces if pc.emitted]

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "pieces": [pc.to_dict() for pc in self.pieces],
            "text": self.text,
            "stats": self.stats.to_dict(),
            "timings_ms": dict(self.timings_ms),
            "draft_size": self.draft_size,
            "stop": self.stop,
        } | ({"verifier": self.verifier} if self.verifier is not None else {})
