"""Smoke test of ``specdec train medusa`` / ``specdec train eagle`` on the shipped target with a few
tiny windows (CI never retrains the shipped heads): features, training, resume, the folder with
its card and tree, and that the freshly trained heads load into the engine and stay exact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from specdec.models.loading import DEFAULT_TARGET
from specdec.training.heads_train import HeadsOptions, train_eagle, train_medusa


def _work(tmp_path: Path) -> Path:
    """Token arrays as the base training leaves them: real code encoded by the shipped tokenizer."""
    import inspect

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(DEFAULT_TARGET))
    work = tmp_path / "work"
    work.mkdir()
    for name, module in (("train", json), ("heldout", inspect)):
        ids = tok.encode(Path(module.__file__).read_text(), add_special_tokens=False)[:6000]
        np.save(work / f"{name}.npy", np.asarray(ids, dtype=np.uint16))
    return work


def _options(tmp_path: Path, work: Path, steps: int) -> HeadsOptions:
    return HeadsOptions(
        target=DEFAULT_TARGET,
        work=work,
        cache=tmp_path / "cache",
        out=tmp_path / "out",
        corpus_windows=4,
        greedy_windows=2,
        heldout_windows=2,
        prefix=16,
        cont=8,
        steps=steps,
        batch=32,
        window=16,
        nodes=6,
        ckpt_every=1,
    )


@pytest.mark.slow
def test_train_heads_writes_loadable_folders_resumes_and_stays_exact(tmp_path):
    work = _work(tmp_path)
    medusa = train_medusa(_options(tmp_path, work, steps=3))
    eagle = train_eagle(_options(tmp_path, work, steps=3))
    out = tmp_path / "out"
    assert len(medusa["heldout_top1_per_head"]) == 4 and len(eagle["heldout_top1_per_depth"]) == 3
    for kind in ("medusa", "eagle"):
        for name in ("config.json", "card.json", "README.md", "model.safetensors"):
            assert (out / kind / name).exists(), (kind, name)
        assert torch.load(tmp_path / "cache" / kind / "state.pt", weights_only=False)["step"] == 3
    tree = json.loads((out / "medusa" / "tree.json").read_text())
    assert 1 <= len(tree["paths"]) <= 6
    # resume: the same options with more steps continue from the checkpoint
    train_medusa(_options(tmp_path, work, steps=5))
    assert torch.load(tmp_path / "cache" / "medusa" / "state.pt", weights_only=False)["step"] == 5
    # barely trained heads are bad drafts, and still exact: the verifier decides every token
    from specdec.core.config import GenerateSpec
    from specdec.engine.session import Engine

    engine = Engine.load(DEFAULT_TARGET, None, heads_dir=out)
    assert {"medusa", "eagle"} <= set(engine.methods)
    prompt = "def fibonacci(n):\n    if n < 2:\n        return n\n    return"
    spec = {"max_new_tokens": 24, "sampling": {"temperature": 0.0}}
    want = engine.generate(prompt, GenerateSpec.from_dict({"method": "none", **spec})).tokens
    for method in ("medusa", "eagle"):
        assert engine.generate(prompt, GenerateSpec.from_dict({"method": method, **spec})).tokens == want


def test_resuming_a_checkpoint_validated_on_another_split_says_so_and_forgets_its_best(tmp_path, capsys):
    """A checkpoint made under another validation split may have trained on today's validation
    answers (2026-12-06: Medusa resumed after the split moved to answer ids kept its first check,
    step 1,520, as the best): the resume says so, and the old best is not kept."""
    from specdec.training.heads_train import fit

    torch.manual_seed(0)
    module = torch.nn.Linear(2, 1)
    x, y = torch.randn(16, 2), torch.randn(16, 1)
    opt = HeadsOptions(target=DEFAULT_TARGET, steps=2, batch=16, lr=1e-2, ckpt_every=1)

    def loss_fn(a, b):
        return torch.nn.functional.mse_loss(module(a), b)

    def val_fn():
        return loss_fn(x, y)

    fit(module, loss_fn, lambda step: (x, y), opt, tmp_path, "toy", val_fn, "old-split")
    assert "another split" not in capsys.readouterr().out
    opt.steps = 3
    fit(module, loss_fn, lambda step: (x, y), opt, tmp_path, "toy", val_fn, "by-id")
    out = capsys.readouterr().out
    assert "validated on another split or loss ('old-split', now 'by-id')" in out and "start cold" in out
    assert torch.load(tmp_path / "state.pt", weights_only=False)["best"]["tag"] == "by-id"
