"""Token healing on the batching backend: a healed request batched with others gives exactly its
solo run through the single-request loop (greedy and seeded), and a heal text nothing spells ends
only that request with an error."""

from __future__ import annotations

import pytest

from specdec.core import healing
from specdec.core.config import ConfigError, GenerateSpec, SamplingParams
from specdec.serving.backend import Request
from specdec.serving.batch import BatchBackend
from tests.seeded import fixed_k


def _tokens(handle) -> list[int]:
    return [t for ev in handle for t in ev.token_ids]


def test_healed_rows_in_a_batch_equal_their_solo_runs(engine, prompts):
    reqs = []
    for i, p in enumerate(prompts[20:26]):
        text = p.rstrip() + (" retu" if i % 2 else "\n    resu")
        cut = healing.split(text)
        heal = text[cut:] if i != 5 else ""
        sp = SamplingParams(0.0 if i % 3 else 0.8, seed=i)
        method = ("none", "lookup", "medusa", "draft", "eagle", "none")[i]
        spec = GenerateSpec(method=method, max_new_tokens=10, sampling=sp, heal=heal, k=fixed_k(method, 2))
        reqs.append((text[:cut] if heal else text, spec))
    assert len(reqs) == 6 and BatchBackend.capabilities.heal
    solo = [engine.generate(p, s).tokens for p, s in reqs]
    b = BatchBackend(engine, max_batch=6, max_queue=8)
    try:
        handles = [b.submit(Request(p, s)) for p, s in reqs]
        got = [_tokens(h) for h in handles]
        assert got == solo
    finally:
        assert b.shutdown(30)


def test_an_unspellable_heal_text_ends_only_that_request(engine, prompts):
    b = BatchBackend(engine, max_batch=2, max_queue=4)
    try:
        bad = b.submit(Request(prompts[0], GenerateSpec(method="none", max_new_tokens=4, heal="\U0001f600\U0001f601")))
        good = b.submit(Request(prompts[1], GenerateSpec(method="none", max_new_tokens=4)))
        with pytest.raises(ConfigError, match="cannot heal"):
            list(bad)
        assert bad.stop == "error"
        assert _tokens(good) == engine.generate(prompts[1], GenerateSpec(method="none", max_new_tokens=4)).tokens
    finally:
        assert b.shutdown(30)
