"""At temperature > 0 the engine's output is distributed as the target's, on the shipped models.

The first token of a draft-method step (accepted draft token or recovered token) is drawn many
times with different seeds and compared with p, the target's tempered distribution, by a
chi-square test. The test has teeth: the same statistic on samples from the draft's q (what a
verifier that accepts everything would emit) must be rejected.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.sampling import to_probs

PROMPT = "import os\nimport sys\n\n\ndef main(argv):\n    "
TRIALS = int(__import__("os").environ.get("SPECDEC_TRIALS", 1500))
T = 1.0


def chi2_pvalue(counts: np.ndarray, p: np.ndarray, n: int) -> float:
    expected = p * n
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    return float(chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["calibrated", "int8"])
def test_first_token_of_a_speculative_step_is_distributed_as_p(engine, precision):
    """Also with the draft's weights in int8 (specdec/fast/lowp.py), whose q differs most from float32's."""
    draft = engine.proposers["draft"]
    if precision != "calibrated":
        if precision not in draft.precisions:
            pytest.skip(f"no {precision} weights here")
        draft.set_precision(precision)
    try:
        _first_token_test(engine)
    finally:
        draft.set_precision(engine.calibration.choices.get("precision", {}).get("draft", "fp32"))


@pytest.mark.slow
def test_a_draft_on_a_reduced_vocabulary_keeps_p(engine):
    """FR-Spec on the draft (``DraftModel.set_vocab``, 4-bit weights): q is zero outside the subset,
    which here leaves out p's most likely token, so p is kept only through the recovered tokens."""
    from specdec.proposers.draft_quant import formats

    prop = engine.proposers["draft"]
    if not formats(prop.model):
        pytest.skip("no 4-bit format is offered for the draft here")
    p, q = _p_q(engine)
    sub = sorted(set(np.argsort(-q)[:32].tolist()) - {int(p.argmax())})
    prop.set_weights(formats(prop.model)[-1])
    prop.set_vocab(torch.tensor(sub))
    try:
        q_sub = np.where(np.isin(np.arange(len(q)), sub), q, 0.0)
        _first_token_test(engine, q_sub / q_sub.sum(), allowed=set(sub))
    finally:
        prop.set_weights("fp32")
    assert prop.vocab_ids is None


def _p_q(engine) -> tuple[np.ndarray, np.ndarray]:
    ids = engine.encode(PROMPT)
    with torch.inference_mode():
        p = to_probs(engine.target.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), T).numpy()
        q = to_probs(engine.draft_model(input_ids=torch.tensor([ids])).logits[0, -1].float(), T).numpy()
    p, q = p.astype(np.float64), q.astype(np.float64)
    return p / p.sum(), q / q.sum()


def _first_token_test(engine, q: np.ndarray | None = None, allowed: set[int] | None = None):
    """``q``: the draft's distribution for the teeth (default: the float draft's); ``allowed``: the
    only ids an accepted draft token may be."""
    ids = engine.encode(PROMPT)
    p, q_float = _p_q(engine)
    q = q_float if q is None else q
    counts = np.zeros_like(p)
    kinds: dict[str, int] = {}
    for seed in range(TRIALS):
        spec = GenerateSpec(
            method="draft", k=1, max_new_tokens=2, confidence=0.0, sampling=SamplingParams(temperature=T, seed=seed)
        )
        first = next(iter(engine.stream(ids, spec))).emitted[0]
        counts[first.token_id] += 1
        kinds[first.kind] = kinds.get(first.kind, 0) + 1
        assert allowed is None or first.kind != "accepted" or first.token_id in allowed
    assert kinds.get("accepted", 0) > 50 and kinds.get("recovered", 0) > 50  # both branches exercised
    assert chi2_pvalue(counts, p, TRIALS) > 1e-3
    # teeth: samples from q (an accept-everything verifier) fail the same test
    rng = np.random.default_rng(0)
    q_counts = np.bincount(rng.choice(len(q), size=TRIALS, p=q), minlength=len(q)).astype(float)
    assert chi2_pvalue(q_counts, p, TRIALS) < 1e-3
