"""Smoke test of the training pipeline on a tiny corpus (CI never retrains the shipped models):
corpus split, tokenizer, target + online-distilled draft, distillation, export, card, resume."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import pytest

from specdec.training import corpus as C
from specdec.training.run import TrainOptions, train_all


def tiny_options(tmp_path: Path, steps: int) -> TrainOptions:
    std = Path(sysconfig.get_paths()["stdlib"])
    return TrainOptions(
        out=tmp_path / "out",
        work=tmp_path / "work",
        vocab_size=320,
        steps=steps,
        distill_steps=2,
        greedy_steps=2,
        greedy_windows=2,
        batch=2,
        seq_len=32,
        compile=False,
        roots={"json": std / "json", "email": std / "email"},
        target_shape=dict(hidden=32, layers=1, heads=2, ffn=64),
        draft_shape=dict(hidden=16, layers=1, heads=1, ffn=32),
        eval_windows=2,
    )


def test_split_is_by_file_and_deterministic():
    keys = [f"stdlib/mod{i}.py" for i in range(2000)]
    held = [k for k in keys if C.split_of(k) == "heldout"]
    assert 40 < len(held) < 120  # about 4 %
    assert held == [k for k in keys if C.split_of(k) == "heldout"]


@pytest.mark.slow
def test_train_all_produces_loadable_models_with_cards_and_resumes(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    card = train_all(tiny_options(tmp_path, steps=3))
    out = tmp_path / "out"
    for role in ("target", "draft"):
        AutoModelForCausalLM.from_pretrained(str(out / role))
        AutoTokenizer.from_pretrained(str(out / role))
        data = json.loads((out / role / "card.json").read_text())
        assert {"heldout_loss_target", "heldout_loss_draft", "greedy_agreement"} <= set(data)
    assert card["draft_to_target_flops"] < 1.0
    manifest = json.loads((out / "corpus.json").read_text())
    assert manifest["n_files"]["train"] > 0 and manifest["n_tokens"]["heldout"] > 0
    assert (out / "prompts" / "code.jsonl").exists()
    # resume: the same options with more steps continue from the checkpoint at step 3
    state = tmp_path / "work" / "pair" / "state.pt"
    import torch

    assert torch.load(state, weights_only=False)["step"] == 3
    assert torch.load(tmp_path / "work" / "greedy" / "state.pt", weights_only=False)["step"] == 2
    assert card["train_steps_draft_greedy"] == 2
    train_all(tiny_options(tmp_path, steps=5))
    assert torch.load(state, weights_only=False)["step"] == 5
