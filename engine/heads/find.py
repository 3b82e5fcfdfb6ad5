"""Finding the draft heads next to the target and turning them into proposers.

Contract: ``load_head_proposers(root, target_model, vocab)`` looks for ``root/medusa`` and
``root/eagle`` (folders written by ``specdec train medusa|eagle``); each one present becomes a
proposer, each one absent is simply not offered. A folder whose heads were trained for another
target shape (hidden size or vocabulary) raises ``ModelLoadError`` saying so.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ..loading import ModelLoadError

HEAD_METHODS = ("medusa", "eagle")


def _check(folder: Path, target_model: torch.nn.Module) -> None:
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"cannot read {folder}/config.json: {e}") from e
    tc = target_model.config
    if cfg.get("hidden") != tc.hidden_size or cfg.get("vocab", tc.vocab_size) != tc.vocab_size:
        raise ModelLoadError(f"the heads in {folder} were trained for hidden size {cfg.get('hidden')} and vocabulary "
                             f"{cfg.get('vocab', '?')}, but the target has {tc.hidden_size} and {tc.vocab_size}; "
                             f"retrain them with `specdec train {cfg.get('kind', folder.name)} --target ...`")


def load_head_proposers(root: Path | str, target_model: torch.nn.Module, vocab: int | None = None) -> dict:
    from ..proposers.eagle import Eagle
    from ..proposers.medusa import Medusa
    root = Path(root)
    w = target_model.get_output_embeddings().weight
    out = {}
    for name in HEAD_METHODS:
        folder = root / name
        if not (folder / "config.json").exists():
            continue
        _check(folder, target_model)
        try:
            if name == "medusa":
                out[name] = Medusa.load(folder, w.device, w.dtype, vocab)
            else:
                out[name] = Eagle.load(folder, target_model, vocab)
        except (OSError, ValueError, KeyError, RuntimeError) as e:
            raise ModelLoadError(f"cannot load the {name} heads from {folder}: {e}") from e
    return out
