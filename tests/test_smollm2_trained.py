"""SmolLM2's trained draft and heads (assets/smollm2-135m/) are exact: at temperature 0 in fp32,
``draft``, ``medusa`` and ``eagle`` give token for token what the engine's own ``none`` gives on
a few held-out chat prompts. Skipped, saying why, when the model is not installed in the cache
(``specdec models fetch smollm2-135m``) or a folder was not trained. Kept short: 2 prompts x 24
tokens per method, one engine load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from specdec.catalog import known, store
from specdec.paths import ASSETS

MODEL = known.get("smollm2-135m")
KINDS = ("draft", "medusa", "eagle")
N_PROMPTS, MAX_NEW = 2, 24


def _installed() -> Path | None:
    """The converted folder: in the cache the suite uses, else in the user's default cache (the
    suite's conftest points $SPECDEC_CACHE at a fresh folder unless the user set it)."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specdec" / "models"
    for folder in (store.hf_dir(MODEL), home / MODEL.name / "hf"):
        if (folder / "config.json").is_file():
            return folder
    return None


TARGET = _installed()
pytestmark = pytest.mark.skipif(
    TARGET is None,
    reason="SmolLM2-135M-Instruct is not installed in the cache: run `specdec models fetch smollm2-135m`",
)


@pytest.fixture(scope="module")
def engine():
    import torch

    from specdec.engine.load import load_engine

    draft = MODEL.assets / "draft" if (MODEL.assets / "draft" / "config.json").is_file() else None
    return load_engine(TARGET, draft, dtype=torch.float32, calibration=None, heads=MODEL.assets)


@pytest.fixture(scope="module")
def prompts(engine):
    from specdec.engine.chat import render

    rows = [json.loads(line) for line in (ASSETS / "prompts" / "train" / "heldout.jsonl").read_text().splitlines()]
    picks = [r for r in rows if r["category"] in ("chat", "code")][:N_PROMPTS]
    return [render(engine.tokenizer, [{"role": "user", "content": r["prompt"]}]) for r in picks]


def _run(engine, prompt: str, method: str) -> list[int]:
    from specdec.core.config import GenerateSpec, SamplingParams

    spec = GenerateSpec(method=method, max_new_tokens=MAX_NEW, sampling=SamplingParams(0.0))
    return engine.generate(prompt, spec).tokens


@pytest.fixture(scope="module")
def plain(engine, prompts) -> list[list[int]]:
    refs = [_run(engine, prompt, "none") for prompt in prompts]
    assert all(refs)
    return refs


@pytest.mark.parametrize("kind", KINDS)
def test_trained_method_is_exact_at_temperature_0(engine, prompts, plain, kind):
    if not (MODEL.assets / kind / "config.json").is_file():
        pytest.skip(f"{MODEL.assets / kind} is not trained: run `specdec train --model smollm2-135m {kind}`")
    assert kind in engine.methods, f"the engine did not load {kind} from {MODEL.assets}"
    assert [_run(engine, prompt, kind) for prompt in prompts] == plain


def test_shipped_folders_are_small():
    """Everything trained for SmolLM2 fits the 40 MB the project allows in the repository."""
    files = [p for p in MODEL.assets.rglob("*") if p.is_file()] if MODEL.assets.is_dir() else []
    assert sum(p.stat().st_size for p in files) < 40e6


@pytest.mark.parametrize("kind", ["eagle", "medusa"])
def test_a_head_on_a_small_draft_vocabulary_is_still_exact_and_drafts_inside_it(engine, prompts, plain, kind):
    """FR-Spec: a head restricted to a few hundred token ids (much of the answer missing from them)
    proposes only those ids, and the emitted tokens stay none's: the vocabulary changes acceptance only."""
    import torch

    if kind not in engine.methods:
        pytest.skip(f"no {kind} folder for smollm2-135m")
    prop = engine.proposers[kind]
    before = prop.vocab_ids
    ids = torch.tensor(sorted({*range(256), *[t for ref in plain for t in ref[::2]]}))
    seen: list[int] = []
    propose = prop.propose

    def spy(ctx):
        d = propose(ctx)
        seen.extend(d.tokens.tolist())
        return d

    try:
        prop.set_vocab(ids)
        prop.propose = spy
        assert [_run(engine, prompt, kind) for prompt in prompts] == plain
    finally:
        prop.propose = propose
        prop.set_vocab(before)
    assert seen and set(seen) <= set(ids.tolist())
