"""Feature sets shared by ``specdec train medusa`` and ``specdec train eagle``.

Contract: ``feature_sets(opt) -> {"corpus", "greedy", "heldout"}``, each a dict from
``heads_data.build_features`` cached under ``opt.cache``: ``corpus`` are plain training windows
(the heads learn the target's distributions on real code), ``greedy`` are training prefixes
continued greedily by the target (what decoding at temperature 0 looks like), ``heldout`` are
held-out prefixes continued greedily, on which the per-head accuracies and the tree are measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from specdec.training.heads_data import build_features, token_arrays


@dataclass
class HeadsData:
    target: Path = Path("assets/target")
    work: Path = Path(".cache/specdec-train")  # token arrays of the base training (read only)
    cache: Path = Path(".cache/specdec-heads")  # features, checkpoints
    corpus_windows: int = 3072
    greedy_windows: int = 768
    heldout_windows: int = 48
    prefix: int = 128
    cont: int = 128
    seed: int = 0


def load_target(path: Path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, local_files_only=True)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def feature_sets(opt: HeadsData, model=None) -> dict[str, dict]:
    torch.set_flush_denormal(True)
    model = model or load_target(opt.target)
    train, held = token_arrays(opt.work, opt.target, opt.cache)
    c = opt.cache
    return {
        "heldout": build_features(
            model,
            held,
            opt.heldout_windows,
            opt.prefix,
            opt.cont,
            c / "heldout.pt",
            opt.seed + 2,
            desc="held-out continuations",
        ),
        "greedy": build_features(
            model,
            train,
            opt.greedy_windows,
            opt.prefix,
            opt.cont,
            c / "greedy.pt",
            opt.seed + 1,
            desc="train continuations",
        ),
        "corpus": build_features(
            model,
            train,
            opt.corpus_windows,
            opt.prefix + opt.cont,
            0,
            c / "corpus.pt",
            opt.seed,
            desc="corpus features",
        ),
    }
