"""``specdec train``: corpus -> tokenizer -> target + online-distilled draft -> distil -> tune on the
target's greedy continuations -> export -> card.

Contract: ``train_all(TrainOptions)`` is resumable stage by stage: each stage leaves its product in
the work folder (tokenizer, token arrays, ``state.pt`` checkpoints) and is skipped or resumed when
run again with the same options. The final models go to ``out/target`` and ``out/draft`` (HF
folders with the tokenizer and a ``card.json`` of held-out measurements), and the corpus manifest
to ``out/corpus.json``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from specdec.training import corpus as C
from specdec.training.evaluate import evaluate_pair, write_card
from specdec.training.lm import Schedule, distill_draft, greedy_tune, train_pair
from specdec.training.models import DRAFT, TARGET, build, export, per_token_flops
from specdec.training.prompts import make_prompts, write_jsonl
from specdec.training.tokenizer import EOS, train_tokenizer


@dataclass
class TrainOptions:
    out: Path = Path("assets")
    work: Path = Path(".cache/specdec-train")
    vocab_size: int = 4096
    steps: int = 2600
    distill_steps: int = 3400
    greedy_steps: int = 400  # phase 3: draft fine-tuned on the target's greedy continuations
    greedy_windows: int = 768
    batch: int = 8
    seq_len: int = 512
    lr: float = 2e-3
    compile: bool = True
    tokenizer_bytes: int = 30_000_000
    packages: tuple[str, ...] = ("transformers", "tokenizers", "tqdm", "numpy")
    roots: dict[str, Path] | None = None
    target_shape: dict = field(default_factory=lambda: dict(TARGET))
    draft_shape: dict = field(default_factory=lambda: dict(DRAFT))
    eval_windows: int = 64
    seed: int = 0


def _setup_torch() -> None:
    torch.set_flush_denormal(True)  # denormals in gradients and AdamW state: 1.8x slower without


def prepare_data(opt: TrainOptions):
    """Stage 1-2: file list, tokenizer, token arrays (cached in the work folder)."""
    from transformers import AutoTokenizer

    roots = opt.roots or C.default_roots(opt.packages)
    files = C.list_sources(roots)
    train_files = [f for f in files if C.split_of(f.key) == "train"]
    held_files = [f for f in files if C.split_of(f.key) == "heldout"]
    tok_dir = opt.work / "tokenizer"
    if not (tok_dir / "tokenizer.json").exists():

        def sample():
            n = 0
            for f in train_files:
                t = C.read_text(f)
                if t:
                    n += len(t)
                    yield t
                if n > opt.tokenizer_bytes:
                    return

        print(f"training tokenizer (vocab {opt.vocab_size}) on up to {opt.tokenizer_bytes / 1e6:.0f} MB", flush=True)
        train_tokenizer(sample(), opt.vocab_size, tok_dir)
    hf_tok = AutoTokenizer.from_pretrained(str(tok_dir))
    eos_id = hf_tok.convert_tokens_to_ids(EOS)
    raw = hf_tok.backend_tokenizer
    print(f"encoding {len(train_files)} train / {len(held_files)} held-out files", flush=True)
    train = C.encode_split(train_files, raw, eos_id, opt.work / "train.npy")
    held = C.encode_split(held_files, raw, eos_id, opt.work / "heldout.npy")
    manifest = C.write_manifest(files, {"train": int(len(train)), "heldout": int(len(held))}, opt.work / "corpus.json")
    return hf_tok, eos_id, train, held, manifest, held_files


def train_all(opt: TrainOptions) -> dict:
    _setup_torch()
    opt.work.mkdir(parents=True, exist_ok=True)
    hf_tok, eos_id, train, held, manifest, held_files = prepare_data(opt)
    write_jsonl(make_prompts(held_files, 40), opt.out / "prompts" / "code.jsonl")
    print(f"corpus: {json.dumps(manifest)}", flush=True)
    V = len(hf_tok)
    target = build(V, eos_id, opt.target_shape, opt.seed)
    draft = build(V, eos_id, opt.draft_shape, opt.seed + 1)
    sched = Schedule(
        steps=opt.steps,
        batch=opt.batch,
        seq_len=opt.seq_len,
        lr=opt.lr,
        warmup=min(100, opt.steps // 10 + 1),
        seed=opt.seed,
    )
    snap = opt.work / "snapshot"
    t0 = time.time()
    train_pair(
        target,
        draft,
        train,
        sched,
        opt.work / "pair",
        compile_=opt.compile,
        on_ckpt=lambda s: (export(target, hf_tok, snap / "target"), export(draft, hf_tok, snap / "draft")),
    )
    t_pair = time.time() - t0
    dsched = Schedule(
        steps=opt.distill_steps,
        batch=opt.batch,
        seq_len=opt.seq_len,
        lr=opt.lr / 2,
        warmup=min(50, opt.distill_steps // 10 + 1),
        seed=opt.seed + 7,
    )
    if opt.distill_steps > 0:
        distill_draft(
            target,
            draft,
            train,
            dsched,
            opt.work / "distil",
            compile_=opt.compile,
            on_ckpt=lambda s: export(draft, hf_tok, snap / "draft"),
        )
    if opt.greedy_steps > 0:
        gsched = Schedule(
            steps=opt.greedy_steps,
            batch=opt.batch,
            seq_len=opt.seq_len // 2,
            lr=opt.lr / 10,
            warmup=min(20, opt.greedy_steps // 10 + 1),
            seed=opt.seed + 11,
        )
        greedy_tune(
            target,
            draft,
            greedy_windows(opt, target, train),
            train,
            gsched,
            opt.work / "greedy",
            upstream=f"pair {opt.steps}, distil {opt.distill_steps}",
            on_ckpt=lambda s: export(draft, hf_tok, snap / "draft"),
        )
    t_all = time.time() - t0
    return finish(opt, target, draft, hf_tok, held, manifest, sched, dsched, t_pair, t_all)


def greedy_windows(opt: TrainOptions, target, train: np.ndarray) -> torch.Tensor:
    """``greedy_windows`` training prefixes of seq_len/4 tokens, each continued greedily by the
    target for seq_len/4 more (cached in the work folder, per target: keyed by its step count)."""
    from specdec.training.heads_data import build_features

    quarter = opt.seq_len // 4
    target.eval()
    path = opt.work / f"greedy_windows_pair{opt.steps}.pt"
    data = build_features(
        target, train, opt.greedy_windows, quarter, quarter, path, opt.seed + 13, desc="target greedy continuations"
    )
    return data["ids"]


def finish(opt, target, draft, hf_tok, held, manifest, sched, dsched, t_pair, t_all) -> dict:
    """Export fp16 folders, re-load them and measure what ships; write cards and manifest."""
    from transformers import AutoModelForCausalLM

    export(target, hf_tok, opt.out / "target")
    export(draft, hf_tok, opt.out / "draft")
    p = AutoModelForCausalLM.from_pretrained(str(opt.out / "target"), dtype=torch.float32)
    q = AutoModelForCausalLM.from_pretrained(str(opt.out / "draft"), dtype=torch.float32)
    metrics = evaluate_pair(p, q, held, windows=opt.eval_windows, seq_len=min(opt.seq_len, len(held) // 2 - 2))
    fp, fq = per_token_flops(p.config), per_token_flops(q.config)
    common = {
        **metrics,
        "corpus_file_list_sha256_16": manifest["file_list_sha256_16"],
        "train_tokens_available": manifest["n_tokens"]["train"],
        "heldout_tokens": manifest["n_tokens"]["heldout"],
        "train_tokens_seen_target": sched.steps * sched.batch * sched.seq_len,
        "train_tokens_seen_draft_distil": dsched.steps * dsched.batch * dsched.seq_len,
        "train_steps_draft_greedy": opt.greedy_steps,
        "draft_to_target_flops": fq / fp,
        "train_seconds_pair": round(t_pair),
        "train_seconds_total": round(t_all),
        "options": json.loads(json.dumps(asdict(opt), default=str)),
    }
    write_card(
        opt.out / "target",
        {
            **common,
            "name": "specdec target",
            "parameters": p.num_parameters(),
            "description": "Llama target trained on Python source (cross-entropy).",
        },
    )
    write_card(
        opt.out / "draft",
        {
            **common,
            "name": "specdec draft",
            "parameters": q.num_parameters(),
            "description": "Llama draft distilled from the target (KL to its next-token distributions).",
        },
    )
    (opt.out / "corpus.json").write_text(json.dumps(manifest, indent=2))
    print(json.dumps(metrics, indent=2), flush=True)
    return common
