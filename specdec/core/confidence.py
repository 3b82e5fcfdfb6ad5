"""The target's own log-probability of each emitted token: what a front end may call confidence.

Contract (pure torch, no state): ``emitted_logp(logits, draft, path, last, n)`` is the tuple of
``log softmax(logits)`` at each of the first ``n`` emitted tokens of a step: the accepted nodes
``path`` of ``draft`` (each read at its parent's row: row 0 for a child of the root, ``j + 1``
for a child of node ``j``), then ``last``, the step's one extra token, at the row after the path.
The rows are the target's raw logits of that step (temperature 1, no top-k / top-p), so the
figure describes the model and is the same whatever the request's sampling settings or method:
at temperature 0 the verifier's p is one-hot and says nothing about how sure the model was.
The engine puts it on every ``StepEvent`` it decodes (``StepEvent.logp``); the healing step
leaves it empty (its tokens spell text the user already typed). Reading it changes no token.
``emitted_top(..., k)``: the k most likely tokens at the same rows (the OpenAI API's top logprobs).
"""

from __future__ import annotations

import torch


def _rows(draft, path, last: int, n: int) -> tuple[list[int], list[int]]:
    """The logits row each of the first ``n`` emitted tokens was drawn at, and the tokens."""
    path = tuple(path)
    rows = [draft.parents[i] + 1 for i in path] + [path[-1] + 1 if path else 0]
    tokens = [int(draft.tokens[i]) for i in path] + [int(last)]
    return rows[:n], tokens[:n]


def emitted_logp(logits: torch.Tensor, draft, path, last: int, n: int) -> tuple[float, ...]:
    rows, tokens = _rows(draft, path, last, n)
    if not rows:
        return ()
    lp = torch.log_softmax(logits[rows].float(), dim=-1)
    return tuple(float(x) for x in lp[torch.arange(len(rows)), torch.tensor(tokens)])


def emitted_top(logits: torch.Tensor, draft, path, last: int, n: int, k: int) -> tuple:
    """For each of the first ``n`` emitted tokens, the ``k`` most likely tokens of the same rows as
    ``((token_id, log-probability), ...)``, most likely first; () when ``k`` is 0."""
    rows, _ = _rows(draft, path, last, n)
    if not rows or k < 1:
        return ()
    values, ids = torch.log_softmax(logits[rows].float(), dim=-1).topk(k, dim=-1)
    return tuple(tuple(zip(i.tolist(), v.tolist())) for i, v in zip(ids, values))
