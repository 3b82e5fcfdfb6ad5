"""The lean draft path computes what transformers computes (to float tolerance), across a
prefill, single-token steps, a truncation and a buffer that has to grow."""

from __future__ import annotations

import torch

from specdec.models.lean import LeanLlama


def test_lean_logits_match_transformers(engine):
    model = engine.draft_model
    assert LeanLlama.supports(model)
    lean = LeanLlama(model, capacity=16)  # small: forces the buffers to grow
    ids = list(range(200, 300))
    with torch.inference_mode():
        ref = model(input_ids=torch.tensor([ids])).logits[0].float()
    torch.testing.assert_close(lean.forward(ids[:40]).float(), ref[39], atol=1e-4, rtol=1e-4)
    for i in range(40, 60):
        torch.testing.assert_close(lean.forward([ids[i]]).float(), ref[i], atol=1e-4, rtol=1e-4)
    lean.truncate(50)
    torch.testing.assert_close(lean.forward(ids[50:53]).float(), ref[52], atol=1e-4, rtol=1e-4)


def test_unsupported_architectures_fall_back(engine):
    from specdec.proposers.draft import DraftModel, HFRunner

    assert isinstance(DraftModel(engine.draft_model, lean=False).runner, HFRunner)
    assert isinstance(engine.proposers["draft"].runner, LeanLlama)
