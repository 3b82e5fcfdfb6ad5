"""Self-distillation text: the target's own chat answers to the training prompts, cached.

Contract: ``generate(target_dir, prompts, folder, tag, max_new, batch, temperature, seed)`` renders
every prompt through the target's chat template (a user turn, assistant turn opened), continues
them in batches (left padding, transformers' KV cache, the model's own forward; greedy at temperature 0,
else sampled with a seed per batch) and saves each batch as ``<folder>/<tag>/<first>_<n>.pt`` (a list of
``{"prompt": ids, "completion": ids, "hidden": fp16 [len - 1, H]}``, the completion cut after EOS,
``hidden`` the target's last hidden state at every position it was fed: the heads' features,
recorded while generating so no second pass over the text is needed). Prompts already answered
(listed in the ``.idx`` file beside each batch; ``.sec`` holds its seconds) are skipped, so an
interrupted run resumes where it stopped, even with another batch size; ``meta.json`` records the
settings, token counts and tokens/s. ``load(folder, tags)`` returns every cached row. Why
batched: generation is the slow part on a CPU, and one forward over
many rows costs little more than over one (the step is memory-bound); the prompts are
all of a similar short length, so a batch pads little.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
from tqdm import tqdm


def load_tokenizer(target_dir: Path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(target_dir), local_files_only=True)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def render(tok, prompt: str) -> list[int]:
    text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
    return tok(text, add_special_tokens=False)["input_ids"]


def _cut(row: list[int], eos: int) -> list[int]:
    return row[: row.index(eos) + 1] if eos in row else row


def _left_pad(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def _pick(logits: torch.Tensor, temperature: float, gen: torch.Generator) -> torch.Tensor:
    if temperature <= 0:
        return logits.argmax(-1)
    return torch.multinomial(torch.softmax(logits.float() / temperature, -1), 1, generator=gen)[:, 0]


@torch.inference_mode()
def _batch(model, tok, rows: list[list[int]], max_new: int, temperature: float, seed: int) -> list[dict]:
    """Continue ``rows`` (left-padded, KV cached), keeping the target's last hidden state (after
    its final norm: the LM head's input) at every position fed, which the heads train on."""
    from transformers import DynamicCache

    ids, mask = _left_pad(rows, tok.pad_token_id)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    gen = torch.Generator().manual_seed(seed)
    cache, eos, B = DynamicCache(), tok.eos_token_id, len(rows)
    h = model.model(input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache).last_hidden_state
    hs, toks, done = [h], [], torch.zeros(B, dtype=torch.bool)
    for _ in range(max_new):
        nxt = torch.where(done, eos, _pick(model.lm_head(h[:, -1]), temperature, gen))
        toks.append(nxt)
        done |= nxt == eos
        if done.all() or len(toks) == max_new:
            break
        mask, pos = torch.cat([mask, torch.ones(B, 1, dtype=mask.dtype)], 1), pos[:, -1:] + 1
        h = model.model(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos, cache=cache).last_hidden_state
        hs.append(h)
    hid, out = torch.cat(hs, 1).to(torch.float16), torch.stack(toks, 1).tolist()
    width = ids.shape[1]
    res = []
    for i, r in enumerate(rows):
        comp = _cut(out[i], eos)
        n = len(r) + len(comp) - 1  # positions fed to the target (the last token never is)
        res.append({"prompt": r, "completion": comp, "hidden": hid[i, width - len(r) : width - len(r) + n].clone()})
    return res


def generate(
    target_dir: Path,
    prompts: list[str],
    folder: Path,
    tag: str = "greedy",
    max_new: int = 256,
    batch: int = 24,
    temperature: float = 0.0,
    seed: int = 0,
) -> dict:
    from transformers import AutoModelForCausalLM

    out = Path(folder) / tag
    out.mkdir(parents=True, exist_ok=True)
    tok = load_tokenizer(target_dir)
    rows = [render(tok, p) for p in prompts]  # in file order (shuffled): a cut-short run keeps every kind
    todo = [i for i in range(len(rows)) if i not in answered(out)]
    chunks = [todo[i : i + batch] for i in range(0, len(todo), batch)]
    model = None
    made, t0 = 0, time.time()
    bar = tqdm(chunks, desc=f"target writes ({tag})", unit="batch", dynamic_ncols=True, mininterval=5.0)
    for chunk in bar:
        t1 = time.time()
        if model is None:
            model = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32, local_files_only=True)
            model.eval()
        res = _batch(model, tok, [rows[i] for i in chunk], max_new, temperature, seed * 100_003 + chunk[0])
        for i, r in zip(chunk, res):
            r["index"] = i
        made += sum(len(r["completion"]) for r in res)
        name = "-".join(str(i) for i in chunk)
        tmp = out / f"{chunk[0]:04d}.tmp"
        torch.save(res, tmp)
        (out / f"{chunk[0]:04d}_{len(chunk)}.idx").write_text(name + "\n")  # counts once the .pt exists
        (out / f"{chunk[0]:04d}_{len(chunk)}.sec").write_text(f"{time.time() - t1:.1f}\n")
        os.replace(tmp, out / f"{chunk[0]:04d}_{len(chunk)}.pt")
        bar.set_postfix(tok_s=f"{made / (time.time() - t0):.0f}", refresh=False)
    data = load(folder, [tag])
    meta = {
        "tag": tag,
        "prompts": len(rows),
        "max_new_tokens": max_new,
        "batch": batch,
        "temperature": temperature,
        "seed": seed,
        "prompt_tokens": sum(len(r["prompt"]) for r in data),
        "completion_tokens": sum(len(r["completion"]) for r in data),
    }
    secs = sum(float(f.read_text()) for f in out.glob("*.sec") if f.with_suffix(".pt").exists())
    meta["seconds"] = round(secs)
    meta["tokens_per_s"] = round(meta["completion_tokens"] / secs, 1) if secs else None
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def answered(out: Path) -> set[int]:
    """Prompt indices already answered (each batch file has an ``.idx`` list beside it)."""
    done: set[int] = set()
    for f in out.glob("*.idx"):
        if f.with_suffix(".pt").exists():
            done |= {int(i) for i in f.read_text().split("-") if i.strip()}
    return done


def load(folder: Path, tags: list[str]) -> list[dict]:
    rows = []
    for tag in tags:
        for f in sorted((Path(folder) / tag).glob("*.pt")):
            rows += torch.load(f, weights_only=False)
    return rows
