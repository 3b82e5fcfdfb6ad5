"""``specdec export vllm OUT``: vLLM-ready folders for the target, the draft, Medusa and EAGLE.

Contract: ``export(out, assets)`` writes ``out/target`` and ``out/draft`` (HF Llama folders: config,
tokenizer, weights checked name by name), ``out/medusa`` (vLLM's ``MedusaModel`` config with
``medusa_fc_bias``), ``out/eagle`` (a one-layer Llama config whose architecture is the plugin's
``EagleSpecdecLlamaForCausalLM``; ``vllm_plugin/`` must be installed in the vLLM venv, which
``scripts/vllm-env.sh`` does) and ``out/manifest.json``; every tensor goes through the strict maps
of ``specdec/export/vllm_maps.py`` (``ExportError`` on any missing, unexpected or misshapen tensor, before
anything is written for that folder). A folder that is absent in ``assets`` is skipped and said so
in the manifest. Why a copy rather than pointing vLLM at assets/: the heads need other names and
layouts, and one folder tree is what ``specdec vllm serve`` hands to vLLM.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from specdec.export.vllm_maps import ExportError, convert


class Unsupported(ExportError):
    """A folder this export cannot map yet: skipped (and said so in the manifest), the rest written."""


EAGLE_ARCH = "EagleSpecdecLlamaForCausalLM"  # registered by vllm_plugin (starts with "Eagle": kept as is by vLLM)
HF_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def _read(folder: Path) -> tuple[dict, dict]:
    from safetensors.torch import load_file

    try:
        config = json.loads((folder / "config.json").read_text())
        tensors = load_file(str(folder / "model.safetensors"))
    except (OSError, ValueError) as e:
        raise ExportError(f"cannot read {folder}: {e}") from e
    return config, tensors


def _write(folder: Path, config: dict, tensors: dict, copy_from: Path | None = None) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    if copy_from is not None:
        for name in HF_FILES:
            if (copy_from / name).exists():
                shutil.copyfile(copy_from / name, folder / name)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"))
    for p in folder.iterdir():
        p.chmod(0o644)  # safetensors writes 0600; vLLM may run as another user


def export_llama(src: Path, dst: Path) -> None:
    config, tensors = _read(src)
    if config.get("model_type") != "llama":
        raise ExportError(f"{src}: model_type {config.get('model_type')!r}; this export maps Llama folders only")
    _write(dst, config, convert("llama", config, tensors, str(src)), copy_from=src)


def export_model(src: Path, dst: Path) -> None:
    """A target or draft: a Llama folder through the strict map; another architecture that
    transformers saved (a catalogue model: Qwen2, Gemma 3) is copied as it is, since vLLM reads
    such folders directly."""
    config = json.loads((src / "config.json").read_text()) if (src / "config.json").is_file() else {}
    if config.get("model_type") == "llama":
        return export_llama(src, dst)
    if not config.get("architectures"):
        raise ExportError(f"{src}: no architectures in config.json; not a folder transformers saved")
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)


def export_medusa(src: Path, dst: Path) -> None:
    config, tensors = _read(src)
    if config.get("tied"):
        raise Unsupported(
            f"{src}: tied Medusa heads (each head's LM head is the target's) have no vLLM MedusaModel form yet"
        )
    out = convert("medusa", config, tensors, str(src))
    vconfig = {
        "model_type": "medusa",
        "architectures": ["MedusaModel"],
        "hidden_size": config["hidden"],
        "vocab_size": config["vocab"],
        "truncated_vocab_size": config["vocab"],
        "num_heads": config["n_heads"],
        "num_hidden_layers": 1,
        "medusa_fc_bias": True,  # without it vLLM builds bias-free blocks and drops our biases silently
    }
    _write(dst, vconfig, out)


def export_eagle(src: Path, dst: Path, target_config: dict) -> None:
    config, tensors = _read(src)
    out = convert("eagle", config, tensors, str(src))
    h, heads = config["hidden"], config["heads"]
    vconfig = {
        k: target_config[k]
        for k in ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "max_position_embeddings")
        if k in target_config
    }
    vconfig.update(
        model_type="llama",
        architectures=[EAGLE_ARCH],
        hidden_size=h,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=h // heads,
        intermediate_size=config["ffn"],
        num_hidden_layers=1,
        rms_norm_eps=config["eps"],
        rope_parameters={"rope_theta": config["theta"], "rope_type": "default"},
        hidden_act="silu",
        attention_bias=False,
        mlp_bias=False,
        tie_word_embeddings=False,
    )
    _write(dst, vconfig, out)


def folders_of(assets: Path) -> dict[str, Path]:
    """The shipped layout: assets/target, draft, medusa, eagle."""
    return {name: Path(assets) / name for name in ("target", "draft", "medusa", "eagle")}


def export(out: Path, assets: Path | dict) -> dict:
    """Write every folder there is (``assets``: a folder in the shipped layout, or a dict
    target/draft/medusa/eagle -> folder or None, as ``specdec.catalog.resolve`` gives for a
    model); return (and write) the manifest."""
    out = Path(out)
    sources = folders_of(assets) if not isinstance(assets, dict) else assets
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict = {"source": {k: str(Path(v).resolve()) for k, v in sources.items() if v}, "folders": {}}
    manifest["skipped"] = {}
    target_config = json.loads((Path(sources["target"]) / "config.json").read_text())
    jobs = {
        "target": export_model,
        "draft": export_model,
        "medusa": export_medusa,
        "eagle": lambda s, d: export_eagle(s, d, target_config),
    }
    for name, job in jobs.items():
        if not sources.get(name):
            manifest["skipped"][name] = f"the model has no {name}"
            continue
        src = Path(sources[name])
        if not (src / "model.safetensors").exists() and not any(src.glob("model*.safetensors")):
            manifest["skipped"][name] = f"{src} has no model.safetensors"
            continue
        try:
            job(src, out / name)
        except Unsupported as e:
            manifest["skipped"][name] = str(e)
            continue
        manifest["folders"][name] = str((out / name).resolve())
    manifest["plugin"] = {"eagle_architecture": EAGLE_ARCH, "package": "vllm_plugin (specdec-vllm-plugin)"}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
