"""specdec export vllm: every shipped folder maps one-to-one onto vLLM's parameters, the EAGLE map
computes our layer's function under vLLM's names and layout, and a head with a missing or an
unexpected tensor is refused with a message naming it (vLLM itself would load it silently)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from specdec.cli.main import main
from specdec.export.vllm import export
from specdec.export.vllm_maps import ExportError, convert

ASSETS = Path(__file__).resolve().parent.parent / "assets"


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vllm")
    export(out, ASSETS)
    return out


def test_every_folder_exports(exported: Path) -> None:
    manifest = json.loads((exported / "manifest.json").read_text())
    assert set(manifest["folders"]) == {"target", "draft", "medusa", "eagle"} and not manifest["skipped"]
    medusa = json.loads((exported / "medusa" / "config.json").read_text())
    assert medusa["medusa_fc_bias"] is True and medusa["architectures"] == ["MedusaModel"]
    eagle = json.loads((exported / "eagle" / "config.json").read_text())
    assert eagle["architectures"] == ["EagleSpecdecLlamaForCausalLM"] and eagle["num_hidden_layers"] == 1
    src = load_file(str(ASSETS / "target" / "model.safetensors"))
    dst = load_file(str(exported / "target" / "model.safetensors"))
    assert src.keys() == dst.keys() and all(torch.equal(src[k], dst[k]) for k in src)


def test_medusa_map(exported: Path) -> None:
    src = load_file(str(ASSETS / "medusa" / "model.safetensors"))
    dst = load_file(str(exported / "medusa" / "model.safetensors"))
    assert len(dst) == len(src)
    for i in range(4):
        assert torch.equal(dst[f"blocks.{i}.layers.0.bias"], src[f"block.{i}.bias"])
        assert torch.equal(dst[f"lm_heads.{i}.weight"], src[f"proj.{i}.weight"])


def _vllm_eagle(w: dict, cfg: dict, f: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """vLLM's EAGLE layer (the plugin's class) written out on the exported names: fc(cat(e, f)) with
    bias, then a Llama decoder layer whose input layernorm is kept, no final norm."""
    from specdec.proposers.eagle.layer import rope

    heads, eps, p = cfg["num_attention_heads"], cfg["rms_norm_eps"], "layers.0."
    x = F.linear(torch.cat([e, f], -1), w["fc.weight"], w["fc.bias"])
    h = F.rms_norm(x, (x.shape[-1],), w[p + "input_layernorm.weight"], eps)
    q, k, v = (
        F.linear(h, w[p + f"self_attn.{n}_proj.weight"]).unflatten(-1, (heads, -1)).transpose(0, 1) for n in "qkv"
    )
    pos, theta = torch.arange(x.shape[0]), cfg["rope_parameters"]["rope_theta"]
    att = F.scaled_dot_product_attention(rope(q, pos, theta), rope(k, pos, theta), v, is_causal=True)
    x = x + F.linear(att.transpose(0, 1).flatten(-2), w[p + "self_attn.o_proj.weight"])
    h = F.rms_norm(x, (x.shape[-1],), w[p + "post_attention_layernorm.weight"], eps)
    mlp = F.silu(F.linear(h, w[p + "mlp.gate_proj.weight"])) * F.linear(h, w[p + "mlp.up_proj.weight"])
    return x + F.linear(mlp, w[p + "mlp.down_proj.weight"])


def test_eagle_map_computes_our_layer(exported: Path) -> None:
    from specdec.proposers.eagle.layer import EagleLayer

    ours = EagleLayer.load(ASSETS / "eagle")
    w = {k: v.float() for k, v in load_file(str(exported / "eagle" / "model.safetensors")).items()}
    cfg = json.loads((exported / "eagle" / "config.json").read_text())
    g = torch.Generator().manual_seed(0)
    f, e = torch.randn(7, 320, generator=g), torch.randn(7, 320, generator=g)
    with torch.no_grad():
        want = ours(f[None], e[None])[0]
    torch.testing.assert_close(_vllm_eagle(w, cfg, f, e), want, atol=1e-4, rtol=1e-4)


def _head_copy(tmp_path: Path, name: str, edit) -> Path:
    assets = tmp_path / "assets"
    for part in ("target", name):
        shutil.copytree(ASSETS / part, assets / part)
    tensors = load_file(str(assets / name / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(assets / name / "model.safetensors"))
    return assets


@pytest.mark.parametrize(
    "name,edit,needle",
    [
        ("medusa", lambda t: t.pop("block.2.bias"), "missing tensor(s) block.2.bias"),
        ("medusa", lambda t: t.update({"block.4.bias": torch.zeros(320)}), "unexpected tensor(s) block.4.bias"),
        ("eagle", lambda t: t.pop("ln1"), "missing tensor(s) ln1"),
        ("eagle", lambda t: t.update({"norm": torch.ones(320)}), "unexpected tensor(s) norm"),
        ("eagle", lambda t: t.update({"fc.weight": torch.zeros(320, 320)}), "wrong shape(s): fc.weight"),
    ],
)
def test_export_refuses_a_head_that_does_not_map(tmp_path: Path, capsys, name, edit, needle) -> None:
    assets = _head_copy(tmp_path, name, edit)
    with pytest.raises(ExportError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        export(tmp_path / "out", assets)
    assert main(["export", "vllm", str(tmp_path / "out2"), "--assets", str(assets)]) == 2
    assert needle in capsys.readouterr().err


def test_llama_map_refuses_an_untied_head_without_lm_head() -> None:
    cfg = json.loads((ASSETS / "draft" / "config.json").read_text()) | {"tie_word_embeddings": False}
    tensors = load_file(str(ASSETS / "draft" / "model.safetensors"))
    with pytest.raises(ExportError, match="missing tensor"):
        convert("llama", cfg, tensors)
