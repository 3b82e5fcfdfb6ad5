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


def _first_token_test(engine):
    ids = engine.encode(PROMPT)
    with torch.inference_mode():
        p = to_probs(engine.target.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), T).numpy()
        q = to_probs(engine.draft_model(input_ids=torch.tensor([ids])).logits[0, -1].float(), T).numpy()
    p, q = p.astype(np.float64), q.astype(np.float64)
    p, q = p / p.sum(), q / q.sum()
    counts = np.zeros_like(p)
    kinds: dict[str, int] = {}
    for seed in range(TRIALS):
        spec = GenerateSpec(
            method="draft", k=1, max_new_tokens=2, confidence=0.0, sampling=SamplingParams(temperature=T, seed=seed)
        )
        first = next(iter(engine.stream(ids, spec))).emitted[0]
        counts[first.token_id] += 1
        kinds[first.kind] = kinds.get(first.kind, 0) + 1
    assert kinds.get("accepted", 0) > 50 and kinds.get("recovered", 0) > 50  # both branches exercised
    assert chi2_pvalue(counts, p, TRIALS) > 1e-3
    # teeth: samples from q (an accept-everything verifier) fail the same test
    rng = np.random.default_rng(0)
    q_counts = np.bincount(rng.choice(len(q), size=TRIALS, p=q), minlength=len(q)).astype(float)
    assert chi2_pvalue(q_counts, p, TRIALS) < 1e-3
