"""Self-distillation data for the draft heads: the frozen target's own greedy continuations and
its last hidden states over them, computed once and shared by Medusa and EAGLE training.

Contract: ``build_features(target, tokens, n_windows, prefix, cont, path)`` draws ``n_windows``
windows of ``prefix`` corpus tokens (an RNG with a fixed seed), lets the target continue each one
greedily for ``cont`` tokens (batched, KV cached, EOS not special: the continuation is what the
target itself would emit at temperature 0), then runs the target once over every whole window and
stores ``ids`` (int64 [N, prefix+cont]) and ``hidden`` (float16 [N, prefix+cont, H], the target's
last hidden state after its final norm, i.e. the input of its LM head) in ``path`` (a ``.pt``
file). An existing file with the same shape settings is reused, so a re-run costs nothing.
``token_arrays(work, target_dir)`` returns the (train, heldout) token arrays of the base training,
re-encoding the corpus with the target's tokenizer when the arrays are absent (a fresh machine).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm


def token_arrays(work: Path, target_dir: Path, out_work: Path) -> tuple[np.ndarray, np.ndarray]:
    """(train, heldout) uint16 arrays: from ``work`` if there, else re-encoded into ``out_work``."""
    for folder in (work, out_work):
        if (folder / "train.npy").exists() and (folder / "heldout.npy").exists():
            return np.load(folder / "train.npy", mmap_mode="r"), np.load(folder / "heldout.npy", mmap_mode="r")
    from transformers import AutoTokenizer

    from specdec.training import corpus as C
    from specdec.training.tokenizer import EOS

    print(f"no token arrays in {work}: encoding the corpus with the target's tokenizer", flush=True)
    tok = AutoTokenizer.from_pretrained(str(target_dir), local_files_only=True)
    files = C.list_sources(C.default_roots())
    eos = tok.convert_tokens_to_ids(EOS)
    split = {s: [f for f in files if C.split_of(f.key) == s] for s in ("train", "heldout")}
    train = C.encode_split(split["train"], tok.backend_tokenizer, eos, out_work / "train.npy")
    held = C.encode_split(split["heldout"], tok.backend_tokenizer, eos, out_work / "heldout.npy")
    return train, held


@torch.inference_mode()
def greedy_continue(model, prefix: torch.Tensor, cont: int) -> torch.Tensor:
    """[B, P] -> [B, P + cont]: the target's greedy continuation (batched, with a KV cache)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    out = model(input_ids=prefix, cache=cache, use_cache=True)
    seq = [prefix]
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    for _ in range(cont):
        seq.append(nxt)
        if len(seq) - 1 == cont:
            break
        out = model(input_ids=nxt, cache=cache, use_cache=True)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    return torch.cat(seq, dim=1)


@torch.inference_mode()
def last_hidden(model, ids: torch.Tensor) -> torch.Tensor:
    """The target's last hidden state (after the final norm: the LM head's input), [B, T, H]."""
    return model.get_decoder()(input_ids=ids).last_hidden_state


def build_features(
    model,
    tokens: np.ndarray,
    n_windows: int,
    prefix: int,
    cont: int,
    path: Path,
    seed: int = 0,
    batch: int = 32,
    desc: str = "target features",
) -> dict:
    """Windows of ``prefix`` corpus tokens plus ``cont`` greedy target tokens (``cont`` may be 0:
    plain corpus windows, labelled later by the target's own distributions), with hidden states."""
    settings = {"n_windows": n_windows, "prefix": prefix, "cont": cont, "seed": seed, "n_tokens": int(len(tokens))}
    if path.exists():
        data = torch.load(path, weights_only=False)
        if data.get("settings") == settings:
            return data
    rng = np.random.default_rng([seed, 17])
    starts = rng.integers(0, len(tokens) - prefix - 1, size=n_windows)
    model.eval()
    ids_all, hid_all = [], []
    for i in tqdm(range(0, n_windows, batch), desc=desc, unit="batch", dynamic_ncols=True, mininterval=2.0):
        rows = [np.asarray(tokens[s : s + prefix], dtype=np.int64) for s in starts[i : i + batch]]
        ids = torch.from_numpy(np.stack(rows))
        ids = greedy_continue(model, ids, cont) if cont else ids
        ids_all.append(ids)
        hid_all.append(last_hidden(model, ids).to(torch.float16))
    data = {"settings": settings, "ids": torch.cat(ids_all), "hidden": torch.cat(hid_all)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(data, tmp)
    os.replace(tmp, path)
    return data
