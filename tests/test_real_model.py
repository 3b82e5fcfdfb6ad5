"""Exact on the real model: SmolLM2-135M-Instruct (specdec models fetch), fp32.

At temperature 0 every method the model has emits exactly transformers' ``generate(do_sample=False)``
tokens on chat prompts rendered through its template; at temperature 1 the first token of a
speculative step is distributed as the target's p (chi-square, with teeth). The README's test
command fetches the model first, so a missing model is an error here, not a skip.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_distribution import chi2_pvalue

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.sampling import to_probs
from tests.smol_helpers import smol_engine

QUESTIONS = [
    "Explain in a short paragraph why the sky is blue.",
    "Write a Python function that returns the square of a number.",
    "Give me three tips for writing clear emails.",
]
N = 24


@pytest.fixture(scope="module")
def smol():
    """SmolLM2 (tests/smol_helpers.py)."""
    return smol_engine(draft=True)


def chat_ids(engine, question: str) -> list[int]:
    from specdec.engine.chat import render

    return engine.encode(render(engine.tokenizer, [{"role": "user", "content": question}]))


def hf_greedy(engine, ids: list[int], n: int) -> list[int]:
    model = engine.target.model
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False)
    return out[0, len(ids) :].tolist()


def engine_tokens(engine, ids: list[int], method: str, n: int) -> list[int]:
    spec = GenerateSpec(method=method, max_new_tokens=n, sampling=SamplingParams(temperature=0.0))
    return [t for ev in engine.stream(ids, spec) for t in ev.token_ids][:n]


@pytest.mark.slow
def test_every_method_gives_transformers_greedy_tokens_in_fp32(smol):
    assert smol.target.model.dtype == torch.float32
    assert {"none", "lookup"} <= set(smol.methods)
    for q in QUESTIONS:
        ids = chat_ids(smol, q)
        want = hf_greedy(smol, ids, N)
        for method in smol.methods:
            assert engine_tokens(smol, ids, method, N) == want, (method, q)  # both stop at <|im_end|>


@pytest.mark.slow
def test_lookup_first_token_is_distributed_as_p_on_the_real_model(smol):
    """Prompt lookup proposes a copy (q one-hot); at temperature 1 the emitted first token must
    still follow p. The prompt repeats a phrase so lookup drafts its continuation."""
    text = "My favourite colours are red and blue. Her favourite colours are red and"  # lookup drafts " blue", p ~0.28
    ids = smol.encode(text)
    with torch.inference_mode():
        p = to_probs(smol.target.model(input_ids=torch.tensor([ids])).logits[0, -1].double(), 1.0).numpy()
    p = p / p.sum()
    trials = 300
    counts = np.zeros_like(p)
    kinds: dict[str, int] = {}
    for seed in range(trials):
        spec = GenerateSpec(method="lookup", k=2, max_new_tokens=3, sampling=SamplingParams(1.0, seed=seed))
        first = next(iter(smol.stream(ids, spec))).emitted[0]
        counts[first.token_id] += 1
        kinds[first.kind] = kinds.get(first.kind, 0) + 1
    assert kinds.get("accepted", 0) > 20 and kinds.get("recovered", 0) > 20, kinds  # both branches ran
    assert chi2_pvalue(counts, p, trials) > 1e-3
    # teeth: an accept-everything verifier emits lookup's copy every time, which p rejects
    copy = np.zeros_like(p)
    copy[int(np.argmax(counts))] = trials
    assert chi2_pvalue(copy, p, trials) < 1e-3
