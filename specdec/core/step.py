"""One speculative step after the target's forward: verify, commit, pieces, stats and the event.

Contract: ``finish(run, draft, logits, p, commit, ...)`` is steps 3-5 of the loop
(docs/architecture.md) for one request, written once: the single-request loop
(``specdec/engine/session.py``) and every row of the continuous batch
(``specdec/serving/batch/rows.py``) call it after their own forward, so a request's tokens and
events do not depend on which path ran it. ``run`` is that request's state between steps, any
object with the attributes of ``Run`` (the batch's ``Row`` has them):
- verify ``draft`` against ``p`` (the target's probabilities, row 0 after the pending token) with
  the request's generator: ``specdec/core/verify.py``, the one verifier;
- ``commit(path)`` keeps the accepted nodes in the caller's cache (a solo target or a batch slot);
- ``pieces``: every tested token with its fate, then the recovered or bonus token, in display
  order; the emitted tokens stop at EOS or at the request's length (``room``);
- ``run.tokens`` grows by the emitted tokens, the stats count drafted / tested / accepted by
  depth, and the event carries the verifier's record when asked and each emitted token's
  log-probability (``specdec/core/confidence.py``).
Everything is committed before the event is returned, so a caller may stop at any event (I6).
``generator(spec)`` is the request's random source: None at temperature 0 (greedy draws nothing),
else seeded from ``spec.sampling.seed`` or fresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from specdec.core.confidence import emitted_logp, emitted_top
from specdec.core.config import GenerateSpec
from specdec.core.detok import Detokenizer
from specdec.core.events import Piece, Stats, StepEvent
from specdec.core.record import verifier_record
from specdec.core.tree import Draft
from specdec.core.verify import Verdict, verify


def generator(spec: GenerateSpec) -> torch.Generator | None:
    if spec.sampling.greedy:
        return None
    g = torch.Generator()
    if spec.sampling.seed is not None:
        g.manual_seed(spec.sampling.seed)
    else:
        g.seed()
    return g


@dataclass(eq=False)
class Run:
    """One request between steps: its settings, committed tokens (the last one pending), the
    tokens produced so far, the step count, detokenizer, generator, stats and start time."""

    spec: GenerateSpec
    tokens: list[int]
    detok: Detokenizer
    gen: torch.Generator | None
    stats: Stats
    produced: int = 0
    step: int = 0
    t_start: float = field(default_factory=time.perf_counter)


def finish(
    run,
    draft: Draft,
    logits: torch.Tensor,
    p: torch.Tensor,
    commit: Callable[[tuple[int, ...]], None],
    eos_ids: set[int],
    context: int,
    timings: dict[str, float],
    chose_plain: bool = False,
    event: type[StepEvent] = StepEvent,
    **extra,
) -> tuple[StepEvent, Verdict]:
    """Steps 3-5 for ``run`` (see the module docstring). ``timings``: the caller's "propose" and
    "score" milliseconds; "verify" is added here. ``chose_plain``: the proposer was asked and its
    auto k chose a plain step. ``event`` and ``extra``: the event class and its extra fields (the
    batch adds what it did this step)."""
    t0 = time.perf_counter()
    verdict = verify(draft, p, run.gen, record=run.spec.verifier_record)
    commit(verdict.path)
    pieces, new, stop = emitted(eos_ids, draft, verdict, run.step, run.detok, run.spec.max_new_tokens - run.produced)
    run.tokens.extend(new)
    run.produced += len(new)
    if stop is None and len(run.tokens) >= context:
        stop = "context"
    depths = draft.depths()
    run.stats.record(
        [depths[i] for i in range(draft.n)],
        [depths[t[0]] for t in verdict.tested],
        [depths[i] for i in verdict.path],
        len(new),
    )
    run.stats.auto_plain += chose_plain  # read when proposed: a step without a call chose nothing
    t1 = time.perf_counter()
    run.stats.elapsed_s = t1 - run.t_start
    record = None if verdict.record is None else verifier_record(draft, verdict, run.detok.alone)
    ev = event(
        run.step,
        tuple(pieces),
        run.stats.snapshot(),
        {**timings, "verify": 1000 * (t1 - t0)},
        draft.n,
        stop,
        record,
        emitted_logp(logits, draft, verdict.path, verdict.token, len(new)),
        top_logp=emitted_top(logits, draft, verdict.path, verdict.token, len(new), run.spec.top_logprobs),
        **extra,
    )
    return ev, verdict


def emitted(eos_ids: set[int], draft: Draft, verdict: Verdict, step: int, detok: Detokenizer, room: int):
    """Pieces of one step in display order, the emitted tokens (cut at EOS or at ``room``
    tokens) and the stop reason, if any."""
    pieces: list[Piece] = []
    new: list[int] = []
    stop = None
    depths = draft.depths()
    for node, p_x, q_x, ok in verdict.tested:
        tok = int(draft.tokens[node])
        if not ok:
            if stop is None:
                pieces.append(Piece(tok, detok.alone(tok), "rejected", step, depths[node], p_x, q_x))
            continue
        if stop is None:
            pieces.append(Piece(tok, detok.push(tok), "accepted", step, depths[node], p_x, q_x))
            new.append(tok)
            stop = _stop(eos_ids, tok, len(new), room)
    if stop is None:
        pos = len(verdict.path) + 1 if draft.n else 0
        pieces.append(Piece(verdict.token, detok.push(verdict.token), verdict.kind, step, pos))
        new.append(verdict.token)
        stop = _stop(eos_ids, verdict.token, len(new), room)
    return pieces, new, stop


def _stop(eos_ids: set[int], token: int, n_new: int, room: int) -> str | None:
    if token in eos_ids:
        return "eos"
    if n_new >= room:
        return "length"
    return None
