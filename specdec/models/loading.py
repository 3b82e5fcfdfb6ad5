"""Loading models from local Hugging Face folders, offline, with clear errors.

Contract: ``load_models(target_dir, draft_dir, device, dtype)`` returns (tokenizer, target model,
draft model or None). It never contacts a hub (``local_files_only``); a missing folder, a folder
without ``config.json``, or a draft whose tokenizer differs from the target's raises
``ModelLoadError`` with a message that says what to do. Weights stored in fp16/bf16 are upcast
to ``dtype`` (default float32 on CPU, bfloat16 on CUDA).
"""

from __future__ import annotations

from pathlib import Path

import torch

from specdec.paths import ASSETS, DEFAULT_DRAFT, DEFAULT_TARGET  # noqa: F401 (re-exported for loaders)


class ModelLoadError(RuntimeError):
    """A model folder that cannot be used; the message says why and what to do."""


def _check_dir(path: Path, role: str) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise ModelLoadError(
            f"{role} model folder not found: {path} (train the shipped models with "
            f"`specdec train`, or pass --{role} DIR with a local Hugging Face model)"
        )
    if not (path / "config.json").exists():
        raise ModelLoadError(f"{role} folder {path} has no config.json: not a Hugging Face model folder")
    return path


def resolve_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "float64": torch.float64,
        "float16": torch.float16,
        "fp16": torch.float16,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
    }
    if dtype not in table:
        raise ModelLoadError(f"unknown dtype {dtype!r}; choose one of {', '.join(table)}")
    return table[dtype]


def load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as e:  # noqa: BLE001 - any failure here is a user-facing folder problem
        raise ModelLoadError(f"cannot load a tokenizer from {path}: {e}") from e


def load_model(path: Path, role: str, device: str, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # small local models load in milliseconds; keep stderr clean
    path = _check_dir(path, role)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, local_files_only=True)
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"cannot load the {role} model from {path}: {e}") from e
    return model.to(device).eval()


def same_tokenizer(a, b) -> bool:
    return a.get_vocab() == b.get_vocab() and a.eos_token_id == b.eos_token_id


def load_models(
    target_dir: Path | str = DEFAULT_TARGET,
    draft_dir: Path | str | None = DEFAULT_DRAFT,
    device: str = "cpu",
    dtype: str | torch.dtype | None = None,
):
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' requested but torch sees no CUDA device (is this the CPU wheel?)")
    dt = resolve_dtype(dtype, device)
    target_dir = _check_dir(Path(target_dir), "target")
    tok = load_tokenizer(target_dir)
    target = load_model(target_dir, "target", device, dt)
    draft = None
    if draft_dir is not None:
        draft_dir = _check_dir(Path(draft_dir), "draft")
        if (draft_dir / "tokenizer.json").exists() or (draft_dir / "tokenizer_config.json").exists():
            if not same_tokenizer(tok, load_tokenizer(draft_dir)):
                raise ModelLoadError(
                    f"the draft at {draft_dir} uses a different tokenizer from the target at "
                    f"{target_dir}; speculative decoding needs one shared vocabulary"
                )
        draft = load_model(draft_dir, "draft", device, dt)
    return tok, target, draft
