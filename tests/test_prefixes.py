"""Prefixes kept warm (engine/prefixes.py): switching between two documents prefills only what
changed, and the output is exactly a fresh engine's."""

from __future__ import annotations

from engine import prefixes
from engine.config import GenerateSpec


def test_switching_documents_reuses_each_ones_prefix_and_changes_no_token(engine, prompts):
    a, b = prompts[0], prompts[1]
    spec = GenerateSpec(method="none", max_new_tokens=6)
    fed: list[int] = []
    forward = engine.target._forward

    def counting(ids, positions, mask):
        fed.append(len(ids))
        return forward(ids, positions, mask)

    prefixes.forget(engine.target)
    want = {p: engine.generate(p + "\n", spec).tokens for p in (a, b)}  # also warms both
    engine.target._forward = counting
    try:
        for p in (a, b, a, b):
            fed.clear()
            got = engine.generate(p + "\n", spec).tokens
            assert got == want[p]
            assert fed[0] < 16, fed  # the prefill of a switched-to document: only the last tokens
    finally:
        engine.target._forward = forward
        prefixes.forget(engine.target)
