"""``specdec train``: the shipped tiny models, their heads, or a catalogue model's draft and heads.

Contract: ``add_train_parser(sub)`` declares the subcommand; ``cmd_train(args)`` runs it. Without
``--model`` it trains the shipped tiny target's models (``specdec.training.run``) or heads
(``specdec.training.heads_train``) from the Python corpus; with ``--model NAME`` (a catalogue
entry with a chat template, e.g. smollm2-135m) it trains that model's ``draft``, ``medusa`` or
``eagle`` by self-distillation on its own chat answers (``specdec.training.chat_train``) into the
entry's assets folder. Heavy imports happen inside ``cmd_train`` so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_chat(args: argparse.Namespace) -> int:
    from specdec.catalog import known, store
    from specdec.training.chat_train import ChatOptions, train_chat

    if args.what not in ("data", "draft", "medusa", "eagle"):
        raise SystemExit("specdec train --model NAME: say what to make: data, draft, medusa or eagle")
    m = known.get(args.model)
    if m.assets is None or not m.chat:
        raise SystemExit(f"specdec train: {args.model} has no assets folder or no chat template")
    if args.what == "data":
        return cmd_data(args, m)
    opt = ChatOptions(
        target=args.target or store.require(m),
        out=args.out if args.out != Path("assets") else m.assets,
        cache=args.cache if args.cache != Path(".cache/specdec-heads") else args.cache / m.name,
        prompts=args.prompts,
        max_new=args.max_new,
        gen_batch=args.gen_batch,
        n_prompts=args.n_prompts,
        steps=args.steps or 300,
        batch=args.batch if args.batch != 1024 else 512,
        lr=args.lr,
        max_minutes=args.max_minutes,
        n_heads=args.n_heads,
        nodes=args.nodes if args.nodes != 24 else 16,
        data=args.data,
        draft_vocab=args.draft_vocab,
        eagle_passes=args.eagle_passes,
        warm_start=args.warm_start,
    )
    if opt.warm_start and args.what == "draft":
        raise SystemExit("--warm-start: eagle and medusa only (the draft model ships as a transformers folder)")
    train_chat(args.what, opt)
    return 0


def cmd_data(args: argparse.Namespace, m) -> int:
    """Magpie + shipped prompts answered greedily (``--engine``: our batching backend or llama-server),
    then the target's features over them."""
    from specdec.catalog import store
    from specdec.training import features, magpie
    from specdec.training.selfdistill import load_tokenizer

    target = args.target or store.require(m)
    cache = args.cache if args.cache != Path(".cache/specdec-heads") else args.cache / m.name
    tok = load_tokenizer(target)
    meta = magpie.run(
        store.gguf_path(m),
        tok,
        cache / "magpie",
        args.tokens,
        args.parallel,
        args.threads,
        args.max_new,
        engine=args.engine,
        target=target,
    )
    print(f"answers: {meta}")
    got = features.features(target, cache / "magpie" / "answers.jsonl", cache / "text" / "magpie")
    print(f"features: {got}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    import torch

    torch.set_num_threads(args.threads)
    if args.model:
        return cmd_chat(args)
    if args.what == "draft":
        raise SystemExit("specdec train draft needs --model NAME (the tiny draft: plain `specdec train`)")
    if args.what in ("medusa", "eagle"):
        from specdec.training.heads_train import HeadsOptions, train_eagle, train_medusa

        opt = HeadsOptions(
            out=args.out,
            work=args.work,
            cache=args.cache,
            target=args.target or args.out / "target",
            steps=args.steps or 3000,
            batch=args.batch,
            nodes=args.nodes,
            n_heads=args.n_heads,
            node_cost=args.node_cost,
            head_cost=args.head_cost,
            lr=args.lr,
            corpus_windows=args.corpus_windows,
            greedy_windows=args.greedy_windows,
        )
        (train_medusa if args.what == "medusa" else train_eagle)(opt)
        return 0
    from specdec.training.run import TrainOptions, train_all

    opt = TrainOptions(
        out=args.out,
        work=args.work,
        steps=args.steps or 2600,
        distill_steps=args.distill_steps,
        greedy_steps=args.greedy_steps,
        compile=not args.no_compile,
        vocab_size=args.vocab_size,
    )
    train_all(opt)
    return 0


TRAIN_EPILOG = """what:
  models   tokenizer, target and distilled draft (the default; docs/training.md says how long it took)
  medusa   Medusa heads on the frozen target, self-distilled on its own greedy continuations and
           distributions; picks the candidate tree from held-out per-head top-k accuracy
  eagle    the EAGLE draft layer (target feature + next-token embedding -> next feature)
With --model NAME (smollm2-135m): train that model's draft, medusa or eagle by self-distillation:
the target answers assets/prompts/train/train.jsonl (chat template, greedy; cached and resumable
in --cache/NAME/text), then the module trains on those answers and their hidden states into the
model's assets folder (assets/smollm2-135m/{draft,medusa,eagle}). On this project's 2-core CPU
the target wrote 117 tokens/s when the machine was idle (all 480 answers, ~64k tokens: ~10 min)
and 5-9 tokens/s when shared; a module trains in 10-20 minutes (1-4 s a step; --max-minutes
caps it; re-running resumes from the checkpoint). docs/training.md has the figures.
Heads read the base training's token arrays from --work (re-encoding the corpus when they are
absent), keep features and resumable checkpoints in --cache, and write assets/medusa or
assets/eagle (fp16 safetensors, config.json, card.json, README.md; Medusa also tree.json).
"""


def add_train_parser(sub) -> argparse.ArgumentParser:
    t = sub.add_parser(
        "train",
        help="re-train the shipped models or draft heads (resumable)",
        description="Re-train the shipped models (tokenizer, target, draft) or the draft heads "
        "(Medusa, EAGLE) on the frozen target. Every stage is resumable.",
        epilog=TRAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument(
        "what",
        nargs="?",
        default="models",
        choices=["models", "data", "draft", "medusa", "eagle"],
        help="what to train (default: models)",
    )
    t.add_argument("--out", type=Path, default=Path("assets"), help="where the model folders go (default: assets)")
    t.add_argument(
        "--work",
        type=Path,
        default=Path(".cache/specdec-train"),
        help="checkpoints and token arrays of the base training (heads read its token arrays)",
    )
    t.add_argument(
        "--steps",
        type=int,
        default=None,
        help="models: target+draft steps of 8 x 512 tokens (default 2600); heads: optimiser steps "
        "of --batch positions (default 3000)",
    )
    t.add_argument(
        "--distill-steps",
        type=int,
        default=3400,
        help="models: extra draft-only distillation steps of 8 x 512 tokens (default 3400)",
    )
    t.add_argument(
        "--greedy-steps",
        type=int,
        default=400,
        help="models: then fine-tune the draft on the target's own greedy continuations for this "
        "many steps of 8 x 256 tokens (default 400; 0 skips)",
    )
    t.add_argument("--vocab-size", type=int, default=4096, help="models: tokenizer vocabulary")
    t.add_argument("--no-compile", action="store_true", help="models: skip torch.compile (slower, starts faster)")
    h = t.add_argument_group("draft heads (medusa, eagle)")
    h.add_argument("--target", type=Path, default=None, help="the frozen target (default: OUT/target)")
    h.add_argument(
        "--cache",
        type=Path,
        default=Path(".cache/specdec-heads"),
        help="target features and resumable head checkpoints (default: .cache/specdec-heads)",
    )
    h.add_argument("--batch", type=int, default=1024, help="heads: token positions per step (default 1024)")
    h.add_argument("--lr", type=float, default=1e-3, help="heads: peak learning rate (default 1e-3)")
    h.add_argument(
        "--corpus-windows",
        type=int,
        default=3072,
        help="heads: training windows of 256 corpus tokens labelled by the target (default 3072)",
    )
    h.add_argument(
        "--greedy-windows",
        type=int,
        default=768,
        help="heads: training windows of 128 corpus tokens + 128 of the target's greedy continuation (default 768)",
    )
    h.add_argument("--n-heads", type=int, default=4, help="medusa: number of heads (default 4)")
    h.add_argument("--nodes", type=int, default=24, help="medusa: node budget of the candidate tree (default 24)")
    h.add_argument(
        "--node-cost",
        type=float,
        default=0.03,
        help="medusa: extra verification cost of one more tree node relative to a decoding step "
        "(default 0.03; measure yours as docs/heads.md shows; 0 = nodes are free)",
    )
    h.add_argument(
        "--head-cost",
        type=float,
        default=0.065,
        help="medusa: cost of computing one more head relative to a decoding step (default "
        "0.065). The tree is cut where the predicted speedup (1 + E[accepted]) / (1 + node "
        "cost x nodes + head cost x depth) peaks; both 0 = always use the whole --nodes budget",
    )
    add_chat_args(t)
    t.set_defaults(func=cmd_train)
    return t


def add_chat_args(t: argparse.ArgumentParser) -> None:
    c = t.add_argument_group("a catalogue model's draft and heads (--model; self-distillation)")
    c.add_argument("--model", default=None, help="catalogue entry to train for (e.g. smollm2-135m)")
    c.add_argument(
        "--prompts",
        type=Path,
        default=Path("assets/prompts/train/train.jsonl"),
        help="training prompts the target answers (default: assets/prompts/train/train.jsonl)",
    )
    c.add_argument("--max-new", type=int, default=160, help="most tokens per answer (default 160)")
    c.add_argument("--gen-batch", type=int, default=48, help="prompts answered in one batch (default 48)")
    c.add_argument("--n-prompts", type=int, default=0, help="answer only the first N prompts (default: all)")
    c.add_argument(
        "--max-minutes",
        type=float,
        default=0.0,
        help="stop training after this many minutes, checkpointed (a re-run resumes; default: no cap)",
    )
    c.add_argument(
        "--warm-start",
        action="store_true",
        help="eagle, medusa: with no checkpoint in --cache, start from the module shipped in the assets "
        "folder instead of from scratch (to go on training it on a larger set; the card names it)",
    )
    c.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    c.add_argument(
        "--tokens",
        type=int,
        default=1_000_000,
        help="data: answer tokens to reach (resumable; default 1,000,000)",
    )
    c.add_argument("--parallel", type=int, default=16, help="data: requests answered at once (default 16)")
    c.add_argument(
        "--engine",
        choices=["specdec", "llamacpp"],
        default="specdec",
        help="data: who writes the answers: our batching backend on q4_1 (default; the faster here, "
        "docs/training.md 7a) or llama.cpp's server with --parallel slots",
    )
    c.add_argument(
        "--draft-vocab",
        type=int,
        default=8192,
        metavar="N",
        help="eagle, medusa: draft only from the N most frequent answer tokens (FR-Spec; the LM head read on N rows "
        "instead of the whole vocabulary, still exact; default 8192, 0 = the whole vocabulary)",
    )
    c.add_argument(
        "--eagle-passes",
        type=int,
        default=2,
        metavar="P",
        help="eagle: chained passes per position in training, pass p fed pass p-1's predicted features "
        "as a draft node at depth p is (a training-time test, as in EAGLE-3; default 2); a checkpoint "
        "trained with another P resumes with this one, early stopping starting over",
    )
    c.add_argument(
        "--data",
        choices=["shipped", "magpie"],
        default="shipped",
        help="draft/medusa/eagle: train on the target's answers to --prompts (shipped), or on the set "
        "`specdec train --model NAME data` made (magpie: the shipped prompts and the target's own, "
        "answered greedily by --engine's choice; default: shipped)",
    )
