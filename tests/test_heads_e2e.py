"""The shipped Medusa and EAGLE heads on the shipped target: greedy output identical to plain
decoding and to transformers' generate on 20 prompts; at temperature 1 the first token of a tree
step is distributed as p; the CLI offers both methods; the shipped tree is a valid path list."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from specdec.core.config import GenerateSpec, SamplingParams
from specdec.core.sampling import to_probs
from specdec.models.loading import ASSETS
from specdec.proposers.medusa.paths import load_paths, tree_order
from tests.seeded import FIXED_K
from tests.test_distribution import chi2_pvalue
from tests.test_session import hf_greedy

N_PROMPTS = 20
NEW = 32
HEADS = ("medusa", "eagle")


def test_shipped_heads_are_offered_and_carry_cards(engine):
    assert set(HEADS) <= set(engine.methods)  # assets/medusa and assets/eagle next to the target
    for name in HEADS:
        card = json.loads((ASSETS / name / "card.json").read_text())
        key = "heldout_top1_per_head" if name == "medusa" else "heldout_top1_per_depth"
        assert all(0.0 < a <= 1.0 for a in card[key])
    paths = load_paths(ASSETS / "medusa" / "tree.json")
    assert paths == tree_order(paths)[0] and len(paths) >= 1


@pytest.mark.slow
def test_medusa_and_eagle_are_greedy_exact_on_shipped_prompts(engine, prompts):
    assert len(prompts) >= N_PROMPTS
    accepted = {name: 0 for name in HEADS}
    for prompt in prompts[:N_PROMPTS]:
        base = engine.generate(prompt, GenerateSpec(method="none", max_new_tokens=NEW))
        assert base.tokens == hf_greedy(engine, engine.encode(prompt), NEW)
        for name in HEADS:
            out = engine.generate(prompt, GenerateSpec(method=name, max_new_tokens=NEW))
            assert out.tokens == base.tokens, (name, prompt[-80:])
            accepted[name] += out.stats.accepted
    assert all(a > 0 for a in accepted.values()), accepted  # the trees really were used


def _contested_context(engine, prompts, method) -> list[int]:
    """The first context (prompt cut at some length) where the first tested candidate has p in
    [0.2, 0.8]: found from the first step's pieces (p of a first test is the target's p(x))."""
    sampling = SamplingParams(temperature=1.0, seed=0)
    spec = GenerateSpec(method=method, k=FIXED_K[method], max_new_tokens=2, sampling=sampling)
    for prompt in prompts:
        full = engine.encode(prompt)
        for cut in range(40, len(full), 7):
            ev = next(iter(engine.stream(full[:cut], spec)))
            tested = [pc for pc in ev.pieces if pc.kind in ("accepted", "rejected")]
            if tested and 0.2 <= tested[0].p <= 0.8:
                return full[:cut]
    raise AssertionError(f"no contested context for {method}")


@pytest.mark.slow
@pytest.mark.parametrize("method", HEADS)
def test_first_token_of_a_tree_step_is_distributed_as_p(engine, prompts, method):
    """Temperature 1: accepted tree tokens and recovered tokens together follow p (chi-square),
    at a context where the first candidate is neither sure nor hopeless (both branches exercised).
    A fixed k: with auto k the tree methods may take plain steps by measured timings (tests/seeded.py)."""
    ids = _contested_context(engine, prompts, method)
    with torch.inference_mode():
        p = to_probs(engine.target.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), 1.0).numpy()
    p = p.astype(np.float64) / p.sum()
    trials, counts, kinds = 600, np.zeros_like(p), {}
    for seed in range(trials):
        sampling = SamplingParams(temperature=1.0, seed=seed)
        spec = GenerateSpec(method=method, k=FIXED_K[method], max_new_tokens=2, sampling=sampling)
        first = next(iter(engine.stream(ids, spec))).emitted[0]
        counts[first.token_id] += 1
        kinds[first.kind] = kinds.get(first.kind, 0) + 1
    assert kinds.get("accepted", 0) > 30 and kinds.get("recovered", 0) > 30, kinds
    assert chi2_pvalue(counts, p, trials) > 1e-3


@pytest.mark.slow
def test_cli_generates_with_medusa_and_eagle(prompts):
    for method in HEADS:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "specdec",
                "generate",
                prompts[0][-300:],
                "--method",
                method,
                "--max-new-tokens",
                "12",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        res = json.loads(out.stdout)
        assert len(res["tokens"]) == 12 and res["stats"]["tau"] >= 1.0
