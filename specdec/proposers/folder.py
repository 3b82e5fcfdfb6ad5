"""The draft-head folder format shared by Medusa and EAGLE, and its compatibility check.

Contract: a head folder (written by ``specdec train medusa|eagle``) holds ``model.safetensors``
(fp16), ``config.json`` (``kind`` plus the module's constructor arguments), ``card.json`` and a
``README.md`` generated from the card.
- ``save_module(module, folder, card)`` writes one (``module.config`` must hold kind and shape).
- ``read_config(folder, target_model, kind)`` reads config.json and raises ``ModelLoadError`` when
  it is unreadable, of another kind, or trained for another target shape (hidden size or
  vocabulary), saying how to retrain.
- ``load_state(module, folder, device, dtype)`` fills a freshly built module from the weights.
Each proposer package builds its own module class from the config; this file knows no kinds, so
Medusa and EAGLE never import each other.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import nn

from specdec.models.loading import ModelLoadError


def save_module(module: nn.Module, folder: Path, card: dict) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in module.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(module.config, indent=2) + "\n")
    (folder / "card.json").write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")
    lines = [f"# {card.get('name', folder.name)}", "", card.get("description", ""), ""]
    for k, v in sorted(card.items()):
        if k in ("name", "description"):
            continue
        lines.append(f"- {k}: {json.dumps(v) if not isinstance(v, float) else f'{v:.4f}'}")
    (folder / "README.md").write_text("\n".join(lines) + "\n")
    for p in folder.iterdir():
        os.chmod(p, 0o644)  # safetensors writes 0600; the shipped assets are world-readable


def read_config(folder: Path, target_model: nn.Module | None = None, kind: str | None = None) -> dict:
    """config.json without its ``kind`` key, checked against the target's shape."""
    folder = Path(folder)
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"cannot read {folder}/config.json: {e}") from e
    found = cfg.pop("kind", None)
    if kind is not None and found != kind:
        raise ModelLoadError(f"{folder}/config.json holds kind {found!r}, expected {kind!r}")
    if target_model is not None:
        tc = target_model.config
        if cfg.get("hidden") != tc.hidden_size or cfg.get("vocab", tc.vocab_size) != tc.vocab_size:
            raise ModelLoadError(
                f"the heads in {folder} were trained for hidden size {cfg.get('hidden')} and vocabulary "
                f"{cfg.get('vocab', '?')}, but the target has {tc.hidden_size} and {tc.vocab_size}; "
                f"retrain them with `specdec train {found or folder.name} --target ...`"
            )
    return cfg


def load_state(module: nn.Module, folder: Path, device="cpu", dtype: torch.dtype = torch.float32) -> nn.Module:
    from safetensors.torch import load_file

    state = load_file(str(Path(folder) / "model.safetensors"))
    module.load_state_dict({k: v.to(dtype) for k, v in state.items()})
    return module.to(device=device, dtype=dtype).eval()


def param_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
