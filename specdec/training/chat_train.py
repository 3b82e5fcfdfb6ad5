"""``specdec train --model NAME draft|medusa|eagle``: a catalogue model's draft and heads, trained
here on its own chat answers (self-distillation).

Contract: ``train_chat(kind, opt)`` (1) lets the frozen target answer the training prompts
(``opt.prompts``, chat-templated, greedy; ``selfdistill.generate``, cached and resumable under
``<cache>/text``), (2) pads the answers and their hidden states into a ``ChatSet`` with every
``held_every``-th answer kept for validation, (3) trains the module with ``heads_train.fit``
(checkpoint ``<cache>/<kind>/state.pt`` every ``ckpt_every`` steps, where the validation loss
picks the weights kept: early stopping, the data being small; a re-run resumes; a run stops early,
checkpointed, after ``max_minutes``), (4) measures validation accuracy and writes
``<out>/<kind>`` with ``card.json`` and ``README.md`` (``chat_export.py``). What is trained:
- medusa: tied heads (``MedusaHeads(tied=True)``: W_k is the target's LM head, only the residual
  blocks are trained and shipped), tree chosen on validation answers;
- eagle: one decoder layer over (f_j, e_{j+1}) with an FFN of ``eagle_ffn`` (smaller than the
  target's to keep the folder small), tokens read by the target's LM head; ``eagle_passes`` chained
  passes per position (pass p feeds pass p-1's predicted features, as a depth-p draft node does);
- draft: a narrow Llama (``draft_width`` x ``draft_layers``) with its own tied embedding, started
  from the target's embedding projected onto its top ``draft_width`` singular directions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specdec.training import chat_losses as L
from specdec.training import magpie, selfdistill
from specdec.training.chat_data import ChatSet, vocab_subset
from specdec.training.chat_prompts import read
from specdec.training.heads_train import fit

EAGLE_PASSES = 2  # the shipped recipe's passes; a checkpoint's validation tag names any other count


@dataclass
class ChatOptions:
    target: Path
    out: Path
    cache: Path
    prompts: Path = Path("assets/prompts/train/train.jsonl")
    max_new: int = 160
    gen_batch: int = 48
    n_prompts: int = 0  # 0 = all of them
    held_every: int = 12
    steps: int = 300
    batch: int = 512  # positions per step (medusa); eagle and draft: batch // 128 rows
    lr: float = 1e-3
    seed: int = 0
    ckpt_every: int = 20  # also where the validation loss is checked (early stopping)
    max_minutes: float = 0.0  # 0 = no limit
    n_heads: int = 4
    nodes: int = 16
    node_cost: float = 0.1  # SmolLM2 fp32 on 2 cores: 8 tokens in one forward cost ~1.8 one-token steps
    head_cost: float = 0.02  # tied heads share one LM-head product (one more row per head)
    eagle_ffn: int = 1024
    eagle_passes: int = EAGLE_PASSES  # eagle: chained passes per position in training (a training-time test, EAGLE-3)
    draft_vocab: int = 8192  # eagle, medusa: FR-Spec's draft vocabulary, the most frequent answer tokens (0 = all)
    draft_width: int = 256
    draft_layers: int = 2
    draft_ffn: int = 768
    data: str = "shipped"  # "shipped": the target's answers to ``prompts``; "magpie": ``specdec train data``'s set
    warm_start: bool = False  # eagle, medusa: start from the shipped module when no checkpoint exists
    extra: dict = field(default_factory=dict)


def texts(opt: ChatOptions) -> tuple[list[dict], dict]:
    rows, meta = [], {}
    if opt.data == "shipped":
        prompts = [r["prompt"] for r in read(opt.prompts)]
        prompts = prompts[: opt.n_prompts] if opt.n_prompts else prompts
        meta = selfdistill.generate(opt.target, prompts, opt.cache / "text", "greedy", opt.max_new, opt.gen_batch)
        rows += selfdistill.load(opt.cache / "text", ["greedy"])
    else:
        got = selfdistill.load(opt.cache / "text", ["magpie"])
        if not got:
            raise SystemExit(f"no Magpie data under {opt.cache / 'text' / 'magpie'}: run `specdec train data` first")
        made = magpie.meta(opt.cache / "magpie")
        meta = {**meta, "magpie": made, "magpie_rows": len(got)}
        rows += got
    return rows, meta


def load_target(path: Path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, local_files_only=True)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def make_draft(target, opt: ChatOptions):
    from transformers import LlamaConfig, LlamaForCausalLM

    tc = target.config
    heads = max(1, opt.draft_width // 64)
    cfg = LlamaConfig(
        vocab_size=tc.vocab_size,
        hidden_size=opt.draft_width,
        intermediate_size=opt.draft_ffn,
        num_hidden_layers=opt.draft_layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        head_dim=64,
        max_position_embeddings=tc.max_position_embeddings,
        rms_norm_eps=tc.rms_norm_eps,
        rope_parameters=dict(tc.rope_parameters),
        tie_word_embeddings=True,
        bos_token_id=tc.bos_token_id,
        eos_token_id=tc.eos_token_id,
        pad_token_id=tc.pad_token_id,
    )
    torch.manual_seed(opt.seed)
    draft = LlamaForCausalLM(cfg)
    E = target.get_input_embeddings().weight.detach()
    _, _, vh = torch.linalg.svd(E, full_matrices=False)
    proj = vh[: opt.draft_width].contiguous()  # [W, H]: the embedding's top singular directions
    with torch.no_grad():
        draft.get_input_embeddings().weight.copy_(E @ proj.T)
    draft.tie_weights()
    return draft, proj


def warm_start(module, opt: ChatOptions, kind: str) -> None:
    """With ``opt.warm_start`` and no checkpoint under the cache, load the module shipped in
    ``opt.out/kind`` (its fp16 ``model.safetensors``, exactly the trained parameters) so training
    goes on from it on new data instead of starting over; the card's ``options.extra.warm_start``
    names what it started from (kept beside the checkpoint, so a resumed run still says so)."""
    import json

    record = opt.cache / kind / "warm_start.json"
    if (opt.cache / kind / "state.pt").exists():
        if record.exists():
            opt.extra["warm_start"] = json.loads(record.read_text())
        return
    if not opt.warm_start:
        return
    from safetensors.torch import load_file

    path = opt.out / kind / "model.safetensors"
    if not path.exists():
        raise SystemExit(f"--warm-start: no shipped {kind} at {path} (train without --warm-start)")
    got, own = load_file(str(path)), module.state_dict()
    trained = [n for n, p in module.named_parameters() if p.requires_grad]
    if set(got) != set(trained) or any(got[n].shape != own[n].shape for n in trained):
        odd = sorted(set(got) ^ set(trained)) or [n for n in trained if got[n].shape != own[n].shape]
        raise SystemExit(f"--warm-start: {path} does not fit this {kind} ({', '.join(odd[:4])}): other options?")
    module.load_state_dict({n: got[n].float() for n in trained}, strict=False)
    card = json.loads((opt.out / kind / "card.json").read_text())
    data = card.get("data", {})
    was = {
        "from": str(path),
        "steps": card.get("train_steps_done"),
        "completion_tokens": data.get("completion_tokens"),
        "generation": data.get("generation"),
    }
    opt.extra["warm_start"] = was
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(was, indent=1) + "\n")
    print(f"{kind}: warm start from {path} ({was['steps']} steps on {was['completion_tokens']} tokens)")


def _fit(module, loss_fn, batch_fn, opt: ChatOptions, kind: str, val_fn) -> float:
    t0 = time.time()
    warm_start(module, opt, kind)
    tag = f"{opt.n_prompts or 'all'}/{opt.held_every}/by-id"  # the validation answers: which prompts, which split
    if kind == "eagle" and opt.eagle_passes != EAGLE_PASSES:
        tag += f"/passes {opt.eagle_passes}"  # another loss: its values do not compare with the 2-pass ones
    fit(module, loss_fn, batch_fn, opt, opt.cache / kind, kind, val_fn, tag)
    return time.time() - t0


def _cut(rows):
    """Held-out rows cut to the longest of them (as ``rows_batch`` cuts a training batch)."""
    ids, hid, start, end = rows
    T = int(end.max())
    return ids[:, : T + 1], hid[:, :T], start, end


def train_chat(kind: str, opt: ChatOptions) -> dict:
    from specdec.training import chat_export as X

    torch.set_flush_denormal(True)
    rows, meta = texts(opt)
    target = load_target(opt.target)
    eos = target.config.eos_token_id
    train, held = ChatSet.build(rows, eos, opt.held_every)
    subset = vocab_subset(torch.cat([train.ids.flatten(), held.ids.flatten()]))
    held_rows = held.ids[:12], held.hidden[:12].float(), held.start[:12], held.end[:12]
    data = X.data_card(opt, meta, train, held, subset)
    w_s = target.get_output_embeddings().weight[subset].detach()
    if kind == "medusa":
        from specdec.proposers.medusa import MedusaHeads

        heads = MedusaHeads(target.config.hidden_size, target.config.vocab_size, opt.n_heads, tied=True)
        heads.tie(target.get_output_embeddings())
        h, lab = L.medusa_positions(train, opt.n_heads)
        hv, lv = L.medusa_positions(held, opt.n_heads)
        hv, lv = hv[:2000].float(), lv[:2000]
        secs = _fit(
            heads,
            lambda hb, lb: L.medusa_loss(heads, w_s, subset, hb, lb),
            lambda s: L.positions_batch(h, lab, s, opt.batch, opt.seed),
            opt,
            kind,
            lambda: L.medusa_loss(heads, w_s, subset, hv, lv),
        )
        return X.export_medusa(heads, held, opt, data, secs, X.answers(train))
    if kind == "eagle":
        from specdec.proposers.eagle import EagleLayer

        cfg = target.config
        theta = float(cfg.rope_parameters["rope_theta"])
        layer = EagleLayer(cfg.hidden_size, cfg.num_attention_heads, opt.eagle_ffn, cfg.rms_norm_eps, theta)
        embed = target.get_input_embeddings()
        secs = _fit(
            layer,
            lambda *b: L.eagle_loss(layer, embed, w_s, subset, *b, unroll=opt.eagle_passes),
            lambda s: L.rows_batch(train, s, max(1, opt.batch // 128), opt.seed),
            opt,
            kind,
            lambda: L.eagle_loss(layer, embed, w_s, subset, *_cut(held_rows), unroll=opt.eagle_passes),
        )
        return X.export_eagle(layer, target, held, opt, data, secs, X.answers(train))
    if kind == "draft":
        draft, proj = make_draft(target, opt)
        secs = _fit(
            draft,
            lambda ids, hid, s, e: L.draft_loss(draft, subset, proj, ids, hid, s, e),
            lambda s: L.rows_batch(train, s, max(1, opt.batch // 128), opt.seed),
            opt,
            kind,
            lambda: L.draft_loss(draft, subset, proj, *_cut(held_rows)),
        )
        return X.export_draft(draft, target, held, opt, data, secs)
    raise ValueError(f"unknown kind {kind!r}: draft, medusa or eagle")
