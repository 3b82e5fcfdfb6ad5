"""The target's last hidden states over self-distillation text written elsewhere (``magpie.py``).

Contract: ``features(target_dir, answers, out, batch_tokens)`` runs the frozen target (float32,
transformers' own forward) once over every answered row of ``answers`` (``answers.jsonl``:
``prompt_ids`` + ``completion_ids``) not yet in ``out`` and saves batches in ``selfdistill.py``'s
format and layout (``<out>/<first>_<n>.pt`` with ``.idx``/``.sec`` beside it: rows ``{"prompt",
"completion", "hidden", "index"}``, ``hidden`` fp16 [len - 1, H] at every position fed, the last
token never being fed), so ``selfdistill.load(folder, [tag])`` and ``chat_train`` read them as they
read the target's own generations. Resumable: rows already saved are skipped. One pass at a time
per ``out`` (a lock): a second waits for the first, then skips what it saved, so no row is saved
twice (``selfdistill.load`` would read it twice). Rows are read from ``answers`` as whole lines, so
a pass can run while the data run still appends.

Why a second pass and not states recorded while generating: the fastest generator here is
llama.cpp's server, which returns tokens, not hidden states; one batched forward over finished
text (prefill-shaped, all positions at once) costs a small fraction of generating it. Rows are
sorted by length and right-padded (a causal model's outputs at real positions do not depend on
padding after them), ``batch_tokens`` padded positions per forward.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

import torch
from tqdm import tqdm

from specdec.training.appendlog import lock_folder, read_lines
from specdec.training.selfdistill import answered


def _rows(answers: Path) -> list[dict]:
    """Answered rows, whole lines only: a run still writing ``answers`` may have half a line."""
    return [a for a in read_lines(answers) if a["completion_ids"]]


def batches(rows: list[dict], batch_tokens: int) -> list[list[dict]]:
    """Rows sorted by length, grouped so that rows x longest <= batch_tokens (at least one row)."""
    rows = sorted(rows, key=lambda a: len(a["prompt_ids"]) + len(a["completion_ids"]))
    out, cur = [], []
    for a in rows:
        n = len(a["prompt_ids"]) + len(a["completion_ids"]) - 1
        if cur and (len(cur) + 1) * n > batch_tokens:
            out.append(cur)
            cur = []
        cur.append(a)
    return out + ([cur] if cur else [])


@torch.inference_mode()
def hidden_states(model, rows: list[dict]) -> list[torch.Tensor]:
    """fp16 [len - 1, H] per row: the final norm's output at every position fed."""
    seqs = [a["prompt_ids"] + a["completion_ids"][:-1] for a in rows]
    width = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)], mask[i, : len(s)] = torch.tensor(s), 1
    h = model.model(input_ids=ids, attention_mask=mask).last_hidden_state.to(torch.float16)
    return [h[i, : len(s)].clone() for i, s in enumerate(seqs)]


@contextmanager
def one_pass(out: Path):
    """Hold ``out/.lock`` exclusively; wait (saying so) while another pass holds it."""
    with lock_folder(out, True, f"target features: another pass is writing {out}; waiting for it to end"):
        yield


def features(target_dir: Path, answers: Path, out: Path, batch_tokens: int = 8192) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    with one_pass(out):
        return _features(target_dir, answers, out, batch_tokens)


def _features(target_dir: Path, answers: Path, out: Path, batch_tokens: int) -> dict:
    from transformers import AutoModelForCausalLM

    done = answered(out)
    todo = [a for a in _rows(answers) if a["id"] not in done]
    model = None
    made = 0
    for chunk in tqdm(batches(todo, batch_tokens), desc="target features", unit="batch", dynamic_ncols=True):
        t1 = time.time()
        if model is None:
            model = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32, local_files_only=True)
            model.eval()
        res = [
            {"prompt": a["prompt_ids"], "completion": a["completion_ids"], "hidden": h, "index": a["id"]}
            for a, h in zip(chunk, hidden_states(model, chunk))
        ]
        made += sum(len(r["hidden"]) for r in res)
        first = chunk[0]["id"]
        tmp = out / f"{first:06d}.tmp"
        torch.save(res, tmp)
        (out / f"{first:06d}_{len(chunk)}.idx").write_text("-".join(str(a["id"]) for a in chunk) + "\n")
        (out / f"{first:06d}_{len(chunk)}.sec").write_text(f"{time.time() - t1:.1f}\n")
        os.replace(tmp, out / f"{first:06d}_{len(chunk)}.pt")
    return {"rows_done_before": len(done), "rows_now": len(todo), "positions_now": made}
