"""``specdec train --model NAME eagle|medusa --warm-start`` (specdec/training/chat_train.py).

Training goes on from the shipped module on a larger set instead of starting over: the module
gets the shipped weights (fp16 widened), the card names where it started, a checkpoint in the
cache wins over the shipped file, and a module of another shape is refused with the reason.
Uses the shipped SmolLM2 EAGLE layer and Medusa heads (assets/smollm2-135m), no target needed.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from specdec.paths import ASSETS
from specdec.proposers.eagle import EagleLayer
from specdec.proposers.medusa import MedusaHeads
from specdec.training.chat_train import ChatOptions, warm_start

OUT = ASSETS / "smollm2-135m"
HIDDEN, N_HEADS, EPS, THETA, VOCAB = 576, 9, 1e-5, 100000.0, 49152


def _opt(tmp_path, **kw) -> ChatOptions:
    return ChatOptions(target=tmp_path / "target", out=OUT, cache=tmp_path / "cache", warm_start=True, **kw)


def _eagle(ffn: int = 1024) -> EagleLayer:
    torch.manual_seed(0)
    return EagleLayer(HIDDEN, N_HEADS, ffn, EPS, THETA)


def test_eagle_starts_from_the_shipped_weights_and_the_card_says_so(tmp_path):
    layer, opt = _eagle(), _opt(tmp_path)
    shipped = load_file(str(OUT / "eagle" / "model.safetensors"))
    assert not torch.equal(layer.state_dict()["fc.weight"], shipped["fc.weight"].float())  # random before
    warm_start(layer, opt, "eagle")
    for name, w in shipped.items():
        assert torch.equal(layer.state_dict()[name], w.float()), name
    assert all(p.dtype == torch.float32 for p in layer.parameters())
    was = opt.extra["warm_start"]
    assert was["from"].endswith("eagle/model.safetensors") and was["steps"] > 0 and was["completion_tokens"] > 0
    (opt.cache / "eagle" / "state.pt").write_bytes(b"")  # a checkpoint now: a re-run resumes from it
    again = _opt(tmp_path)
    warm_start(_eagle(), again, "eagle")
    assert again.extra["warm_start"] == was  # and its card still names where training started


def test_medusa_starts_from_the_shipped_residual_blocks(tmp_path):
    heads = MedusaHeads(HIDDEN, VOCAB, 4, tied=True)
    warm_start(heads, _opt(tmp_path), "medusa")
    shipped = load_file(str(OUT / "medusa" / "model.safetensors"))
    assert torch.equal(heads.state_dict()["block.3.weight"], shipped["block.3.weight"].float())


def test_a_checkpoint_in_the_cache_wins_and_without_the_flag_nothing_loads(tmp_path):
    opt = _opt(tmp_path)
    (opt.cache / "eagle").mkdir(parents=True)
    (opt.cache / "eagle" / "state.pt").write_bytes(b"")  # fit resumes from it, not from the shipped file
    layer = _eagle()
    before = layer.state_dict()["fc.weight"].clone()
    warm_start(layer, opt, "eagle")
    assert torch.equal(layer.state_dict()["fc.weight"], before) and "warm_start" not in opt.extra
    cold = ChatOptions(target=tmp_path / "t", out=OUT, cache=tmp_path / "other")
    warm_start(layer, cold, "eagle")
    assert torch.equal(layer.state_dict()["fc.weight"], before)


def test_a_module_of_another_shape_is_refused_with_the_reason(tmp_path):
    with pytest.raises(SystemExit, match="does not fit this eagle"):
        warm_start(_eagle(ffn=512), _opt(tmp_path), "eagle")
    heads = MedusaHeads(HIDDEN, VOCAB, 5, tied=True)  # a fifth head the shipped file lacks
    with pytest.raises(SystemExit, match="block.4"):
        warm_start(heads, _opt(tmp_path), "medusa")
    with pytest.raises(SystemExit, match="no shipped eagle"):
        warm_start(_eagle(), ChatOptions(target=tmp_path, out=tmp_path, cache=tmp_path / "c", warm_start=True), "eagle")
