"""The draft model's cache follows the prompt at prefill, as the target's does.

Contract: ``after_prefill(proposer, ids)`` is called right after ``Target.prefill(ids)``. For a
proposer with a draft model of its own (``DraftModel``: it has ``_resync``) it brings the draft's
KV cache to ``ids`` by longest common prefix, the same call ``propose`` makes first; for any other
proposer it does nothing. Why: ``propose`` only runs when a request drafts, so a request that ended
before its first drafting step (superseded by the next key, a 1-token answer, the healing step
alone) left the draft's cache where it was, and the next request's first step paid the whole
catch-up (8-12 ms for 100-190 tokens here) inside its timed decoding, while the target's cache had
moved along with every keystroke. Output is unchanged: the draft only proposes, the verifier
decides (greedy tokens are the target's whatever the draft says).
"""

from __future__ import annotations

import torch


def after_prefill(proposer, ids: list[int]) -> None:
    resync = getattr(proposer, "_resync", None)
    if resync is None or not ids:
        return
    with torch.inference_mode():
        resync(ids)
