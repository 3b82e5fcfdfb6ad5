"""Validation, export and model cards for ``chat_train.py`` (a catalogue model's draft and heads).

Contract: ``export_medusa`` / ``export_eagle`` / ``export_draft`` measure the trained module on
the validation answers (answers to training prompts that no step trained on; the engine's
acceptance on held-out prompts is added to the card later by ``chat_measure.py``), write
``<out>/<kind>`` (heads: the shared fp16 head format; draft: a bf16 Hugging Face folder without
a tokenizer, which the engine takes from the target) with ``card.json`` and ``README.md``, and
return the card. ``data_card`` is the data recipe every card repeats. ``write_card`` rewrites a
card and its README (used again when measured figures are added).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import torch

from specdec.proposers.folder import param_count, save_module
from specdec.proposers.medusa.paths import best_tree, expected_length, joint_from_ranks, save_paths
from specdec.training.chat_data import ChatSet
from specdec.training.chat_losses import medusa_positions
from specdec.training.heads_train import rank_accuracy, unrolled

TOP = 10


def data_card(opt, meta: dict, train: ChatSet, held: ChatSet, subset: torch.Tensor) -> dict:
    return {"data": {**_source(opt, meta), **_split(train, held, subset)}}


def _source(opt, meta: dict) -> dict:
    """Where the answers came from: the shipped prompts answered here, or ``specdec train data``'s
    Magpie set (its own counts, ``magpie.meta``)."""
    if opt.data == "magpie":
        made = meta.get("magpie", {})
        return {
            "source": "magpie: `specdec train data` (the shipped training prompts plus prompts the target wrote "
            "through its chat template; greedy answers; held-out prompts excluded)",
            "prompts": made.get("prompts"),
            "magpie_prompts": made.get("magpie_prompts"),
            "answers": meta.get("magpie_rows"),
            "completion_tokens": made.get("completion_tokens"),
            "stopped_early": made.get("stopped_early", False),
            "max_new_tokens": made.get("max_new_tokens"),
            "engine": made.get("engine"),
            "generation_tokens_per_s_last_run": made.get("tokens_per_s_this_run"),
        }
    return {
        "prompts_file": str(opt.prompts),
        "prompts": meta.get("prompts"),
        "how": "the frozen target answers each prompt (chat template, its default system prompt, greedy, "
        f"at most {opt.max_new} new tokens, batches of {opt.gen_batch}); its last hidden states are kept",
        "completion_tokens": meta.get("completion_tokens"),
        "generation_tokens_per_s": meta.get("tokens_per_s"),
        "generation_seconds": meta.get("seconds"),
    }


def _split(train: ChatSet, held: ChatSet, subset: torch.Tensor) -> dict:
    return {
        "train_answers": len(train),
        "train_completion_tokens": train.completion_tokens,
        "validation_answers": len(held),
        "validation_completion_tokens": held.completion_tokens,
        "softmax_vocab_subset": len(subset),
    }


SECTIONS = (
    ("data", "Data recipe (self-distillation)"),
    ("heldout_engine", "Measured by the engine on held-out prompts (never trained on)"),
    ("options", "Training settings"),
)


def _items(d: dict) -> list[str]:
    return [f"- {k}: {json.dumps(v) if not isinstance(v, float) else f'{v:.4f}'}" for k, v in sorted(d.items())]


def write_card(folder: Path, card: dict) -> None:
    """card.json, and README.md: the description, training and validation figures, then the data
    recipe, the engine's held-out measurement and every training option, one section each."""
    (folder / "card.json").write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")
    lines = [f"# {card.get('name', folder.name)}", "", card.get("description", "")]
    lines += ["", "## Training and validation", ""]
    rest = {k: v for k, v in card.items() if k not in ("name", "description") and k not in dict(SECTIONS)}
    lines += _items(rest)
    for key, title in SECTIONS:
        if key in card:
            lines += ["", f"## {title}", ""] + _items(card[key])
    (folder / "README.md").write_text("\n".join(lines) + "\n")
    for p in folder.iterdir():
        os.chmod(p, 0o644)


def _steps(opt, kind: str) -> dict:
    path = opt.cache / kind / "state.pt"
    if not path.exists():
        return {}
    st = torch.load(path, weights_only=False)
    best = st.get("best") or {}
    return {"train_steps_done": int(st["step"]), "kept_step": best.get("step"), "kept_validation_loss": best.get("val")}


def _base(kind: str, module, opt, data: dict, secs: float) -> dict:
    return {
        "name": f"specdec {kind} for {opt.target.parent.name}",
        "parameters": param_count(module),
        **_steps(opt, kind),
        "train_seconds_last_run": round(secs),
        "options": json.loads(json.dumps(asdict(opt), default=str)),
        **data,
    }


@torch.no_grad()
def export_medusa(heads, held: ChatSet, opt, data: dict, secs: float, train_answers=()) -> dict:
    heads.eval()
    h, lab = medusa_positions(held, heads.n_heads)
    h, lab = h[:3000].float(), lab[:3000]
    logits = heads(h)  # [P, K, V]
    acc, ranks = [], []
    for k in range(heads.n_heads):
        ok = lab[:, k] >= 0
        acc.append(rank_accuracy(logits[ok, k], lab[ok, k], TOP))
        hit = logits[:, k].topk(TOP, -1).indices == lab[:, k, None]
        ranks.append(torch.where(hit.any(-1) & ok, hit.float().argmax(-1), torch.tensor(-1.0)).long())
    joint = joint_from_ranks(torch.stack(ranks, 1).tolist())
    paths = best_tree(joint, opt.nodes, opt.node_cost, opt.head_cost)
    e = expected_length(paths, joint)
    card = _base("medusa", heads, opt, data, secs)
    card.update(draft_vocab(train_answers, held, opt.draft_vocab, opt.out / "medusa"))
    card.update(
        description=f"{heads.n_heads} Medusa heads tied to the target's LM head (only the residual SiLU blocks "
        "are stored), self-distilled on the target's own greedy chat answers; head k predicts the token k+1 "
        "positions ahead.",
        validation_top1_per_head=[round(a[0], 4) for a in acc],
        validation_top10_per_head=[round(sum(a), 4) for a in acc],
        tree_nodes=len(paths),
        tree_expected_tau=round(e + 1, 3),
    )
    folder = opt.out / "medusa"
    save_module(heads, folder, card)
    save_paths(
        folder / "tree.json",
        paths,
        expected_accepted=round(e, 3),
        budget=opt.nodes,
        node_cost=opt.node_cost,
        head_cost=opt.head_cost,
        chosen_by="best_tree on the joint path probabilities of validation answers",
    )
    write_card(folder, card)
    return card


@torch.no_grad()
def export_eagle(layer, target, held: ChatSet, opt, data: dict, secs: float, train_answers=()) -> dict:
    layer.eval()
    embed, head = target.get_input_embeddings(), target.get_output_embeddings()
    n = min(len(held), 24)
    ids, hid, start, end = held.ids[:n], held.hidden[:n].float(), held.start[:n], held.end[:n]
    outs = unrolled(layer, hid[:, :-1], embed(ids[:, 1 : hid.shape[1]]), 3)
    j = torch.arange(hid.shape[1] - 1)[None]
    acc = []
    for d, out in enumerate(outs):
        m = (j >= start[:, None] - 1) & (j + 1 < end[:, None]) & (j >= d)
        acc.append(rank_accuracy(head(out[m]), ids[:, 2:][m], TOP))
    card = _base("eagle", layer, opt, data, secs)
    card.update(draft_vocab(train_answers, held, opt.draft_vocab, opt.out / "eagle"))
    card.update(
        description="One decoder layer over (target feature f_t, embedding of x_{t+1}) predicting f_{t+1}, "
        "tokens from the target's frozen LM head; trained on feature regression plus cross-entropy on the "
        f"target's own greedy chat answers, over {opt.eagle_passes} chained passes per position (pass p fed "
        "pass p-1's predicted features, a training-time test). Depth d uses d chained predicted features.",
        validation_top1_per_depth=[round(a[0], 4) for a in acc],
        validation_top10_per_depth=[round(sum(a), 4) for a in acc],
    )
    save_module(layer, opt.out / "eagle", card)
    write_card(opt.out / "eagle", card)
    return card


def answers(s: ChatSet) -> list[list[int]]:
    """Each row's answer tokens (the completion, after the prompt)."""
    return [s.ids[i, int(s.start[i]) + 1 : int(s.end[i]) + 1].tolist() for i in range(len(s))]


def draft_vocab(train_answers: list[list[int]], held: ChatSet, n: int, folder: Path) -> dict:
    """FR-Spec's draft vocabulary: the ``n`` most frequent answer tokens of the training rows, saved
    beside the head (``proposers/vocab_subset.py``); 0 keeps the full vocabulary."""
    from specdec.proposers import vocab_subset

    if n <= 0 or not train_answers:
        (folder / vocab_subset.FILE).unlink(missing_ok=True)
        return {"draft_vocab": None}
    ids = vocab_subset.frequent(train_answers, n)
    folder.mkdir(parents=True, exist_ok=True)
    vocab_subset.save(folder, ids)
    return {
        "draft_vocab": len(ids),
        "draft_vocab_coverage_train": round(vocab_subset.coverage(train_answers, ids), 4),
        "draft_vocab_coverage_validation": round(vocab_subset.coverage(answers(held), ids), 4),
    }


def step_ms(model, n: int = 15, context: int = 64) -> float:
    """Median ms of one single-token forward after ``context`` cached tokens."""
    from transformers import DynamicCache

    times = []
    with torch.inference_mode():
        for _ in range(3):
            cache = DynamicCache()
            model(input_ids=torch.ones(1, context, dtype=torch.long), cache=cache)
            for _ in range(n // 3):
                t = time.perf_counter()
                model(input_ids=torch.ones(1, 1, dtype=torch.long), cache=cache)
                times.append((time.perf_counter() - t) * 1000)
    return sorted(times)[len(times) // 2]


@torch.no_grad()
def export_draft(draft, target, held: ChatSet, opt, data: dict, secs: float) -> dict:
    draft.eval()
    n = min(len(held), 24)
    ids, start, end = held.ids[:n], held.start[:n], held.end[:n]
    T = int(end.max())
    pred = draft(input_ids=ids[:, :T]).logits.argmax(-1)
    j = torch.arange(T)[None]
    m = (j >= start[:, None]) & (j < end[:, None])
    agree = (pred[m] == ids[:, 1 : T + 1][m]).float().mean().item()
    d_ms, t_ms = step_ms(draft), step_ms(target)
    card = _base("draft", draft, opt, data, secs)
    card.update(
        description=f"A {opt.draft_layers}-layer Llama of width {opt.draft_width} with its own tied embedding "
        "(started from the target's embedding projected on its top singular directions), distilled on the "
        "target's own greedy chat answers. Shares the target's tokenizer (the engine loads it from the target).",
        validation_greedy_agreement=round(agree, 4),
        draft_step_ms=round(d_ms, 2),
        target_step_ms=round(t_ms, 2),
        c_step_ratio=round(d_ms / t_ms, 4),
    )
    folder = opt.out / "draft"
    draft.to(torch.bfloat16).save_pretrained(str(folder))
    write_card(folder, card)
    return card
