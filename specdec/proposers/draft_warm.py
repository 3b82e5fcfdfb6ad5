"""The draft model's cache follows the prompt at prefill when it has fallen far behind.

Contract: ``after_prefill(proposer, ids)`` is called right after ``Target.prefill(ids)``. For a
proposer that offers the interface's optional catch-up hooks (``core/proposer.py``: ``behind`` and
``catch_up``; the draft model, ``DraftModel``, whose KV cache is its own) and would need more than
``WARM_MIN`` tokens fed to reach ``ids`` (longest common prefix), it calls ``catch_up(ids)`` now,
the same feeding ``propose`` does first; otherwise (any other proposer, or a draft only a few
tokens behind) it does nothing, and ``propose`` catches up in its own first forward as before.
Why: ``propose`` only runs when a request drafts, so a request that ended before its first
drafting step (superseded by the next key, a 1-token answer, the healing step alone) left the
draft's cache where it was, while the target's cache moved along with it; the next request's
first drafting step then paid the whole catch-up (8-12 ms for 100-190 tokens here, after a new
document or a moved window). The threshold keeps typing's usual few-token catch-up in one forward
(no extra draft forward per request). Output is unchanged: the draft only proposes, the verifier
decides (greedy tokens are the target's whatever the draft says).
"""

from __future__ import annotations

WARM_MIN = 8  # tokens behind: below this, propose's own first forward catches up


def behind(proposer, ids: list[int]) -> int:
    """How many of ``ids`` the proposer's own cache would have to be fed (0 without one)."""
    hook = getattr(proposer, "behind", None)
    return hook(ids) if hook is not None and ids else 0


def after_prefill(proposer, ids: list[int]) -> None:
    if behind(proposer, ids) > WARM_MIN:
        proposer.catch_up(ids)
