"""The verifier's record of one step, as JSON-ready data for the front ends (no recomputation there).

Contract: ``verifier_record(draft, verdict, text)`` with a ``Verdict`` made by
``verify(..., record=True)`` and ``text(token_id) -> str`` returns
``{"nodes": [...], "final": {...}}``:
- one node per drafted token in proposal order, tested or not: ``node``, ``token``, ``text``,
  ``depth`` (1-based), ``parent`` (-1: the root), ``p`` and ``q`` (p(x) from the target row of its
  parent, q(x) its draft probability, 1.0 for deterministic drafts), and ``verdict``:
  "accepted", "rejected" or "untested". A tested node also has ``p_test`` (r(x) at its test: the
  residual's value when an earlier sibling was rejected, otherwise p(x)), ``ratio`` = min(1, r/q),
  ``u`` (the uniform drawn, or None when the ratio was 0 or 1 and nothing was drawn), and after a
  rejection ``residual``: the top tokens of norm(max(r - q, 0)) as [{"token", "text", "prob"}];
- ``final``: the one token sampled after the accepted path (``token``, ``text``, ``kind`` as in
  ``Verdict.kind``) and ``from``: the top tokens of the row it was sampled from.
Why here: the verifier already draws u and forms the residual; the step-through view shows these
numbers as the proof made visible, so they must be the engine's, not a UI's re-derivation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _tops(pairs, text: Callable[[int], str]) -> list[dict[str, Any]]:
    return [{"token": t, "text": text(t), "prob": pr} for t, pr in pairs]


def verifier_record(draft, verdict, text: Callable[[int], str]) -> dict[str, Any]:
    tokens = draft.tokens.tolist()
    depths = draft.depths()
    checks = {c.node: c for c in verdict.record or ()}
    nodes = []
    for i, tok in enumerate(tokens):
        p, q = verdict.draft_pq[i]
        node: dict[str, Any] = {
            "node": i,
            "token": tok,
            "text": text(tok),
            "depth": depths[i],
            "parent": draft.parents[i],
            "p": p,
            "q": q,
            "verdict": "untested",
        }
        c = checks.get(i)
        if c is not None:
            node.update(
                verdict="accepted" if c.accepted else "rejected",
                p_test=c.p,
                ratio=c.ratio,
                u=c.u,
                residual=_tops(c.residual, text),
            )
        nodes.append(node)
    final = {"token": verdict.token, "text": text(verdict.token), "kind": verdict.kind}
    final["from"] = _tops(verdict.final_from, text)
    return {"nodes": nodes, "final": final}
