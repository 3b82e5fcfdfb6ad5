"""Training loop for the target and its distilled draft, resumable, with a progress bar.

Contract:
- ``train_pair(...)`` trains the target on next-token cross-entropy and, in the same steps, the
  draft on KL(p_target || q_draft) against the target's detached distributions (online
  distillation: the draft costs about 1/8 of the target, so distilling alongside is nearly free).
- ``distill_draft(...)`` continues training the draft alone against the frozen final target, on
  KL(p || q) plus cross-entropy on the target's argmax (``distill_loss``).
- ``greedy_tune(...)`` then fine-tunes the draft on the same loss over batches that are half the
  target's own greedy continuations (``greedy_ids``: what speculation at temperature 0 meets) and
  half corpus windows of the same length.
- All three checkpoint to ``state.pt`` in their work folder every ``ckpt_every`` steps (atomically) and
  resume from it; batches are drawn from an RNG seeded by the step, so a resumed run sees the same
  data as an uninterrupted one.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm


@dataclass(frozen=True)
class Schedule:
    steps: int
    batch: int = 8
    seq_len: int = 512
    lr: float = 3e-3
    warmup: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    ckpt_every: int = 100
    seed: int = 0

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        t = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def batch_at(data: np.ndarray, sched: Schedule, step: int) -> torch.Tensor:
    """B windows of seq_len + 1 tokens, chosen by an RNG seeded with (seed, step)."""
    rng = np.random.default_rng([sched.seed, step])
    starts = rng.integers(0, len(data) - sched.seq_len - 1, size=sched.batch)
    rows = [np.asarray(data[s : s + sched.seq_len + 1], dtype=np.int64) for s in starts]
    return torch.from_numpy(np.stack(rows))


def make_optimizer(model: torch.nn.Module, sched: Schedule) -> torch.optim.Optimizer:
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": sched.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=sched.lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )


def kl_loss(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """Mean over positions of KL(p || q), p from the (detached) target, q from the draft."""
    log_p = F.log_softmax(p_logits.float(), dim=-1)
    log_q = F.log_softmax(q_logits.float(), dim=-1)
    return F.kl_div(log_q.flatten(0, -2), log_p.flatten(0, -2), log_target=True, reduction="batchmean")


def distill_loss(p_logits: torch.Tensor, q_logits: torch.Tensor, hard_weight: float = 0.5) -> torch.Tensor:
    """KL(p || q) plus ``hard_weight`` x cross-entropy of q on the target's argmax.

    The KL term matches the whole distribution (what sampled acceptance min(1, p/q) rewards); the
    hard term pushes q's top token onto p's (what greedy acceptance rewards: at temperature 0 a
    draft token is accepted exactly when the two argmaxes agree), as in DistillSpec's finding that
    the best divergence depends on the decoding strategy."""
    hard = F.cross_entropy(q_logits.flatten(0, -2).float(), p_logits.argmax(-1).flatten())
    return kl_loss(p_logits, q_logits) + hard_weight * hard


def save_state(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def _compiled(model: torch.nn.Module, compile_: bool) -> Callable:
    return torch.compile(model) if compile_ else model


def train_pair(
    target,
    draft,
    data: np.ndarray,
    sched: Schedule,
    work: Path,
    *,
    compile_: bool = True,
    on_ckpt: Callable[[int], None] | None = None,
) -> None:
    """Train target (cross-entropy) and draft (online KL distillation); resumable from ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    state_path = work / "state.pt"
    opt_p, opt_q = make_optimizer(target, sched), make_optimizer(draft, sched)
    start = 0
    if state_path.exists():
        st = torch.load(state_path, weights_only=False)
        target.load_state_dict(st["target"])
        draft.load_state_dict(st["draft"])
        opt_p.load_state_dict(st["opt_p"])
        opt_q.load_state_dict(st["opt_q"])
        start = st["step"]
    f_p, f_q = _compiled(target, compile_), _compiled(draft, compile_)
    target.train()
    draft.train()
    bar = tqdm(
        range(start, sched.steps),
        initial=start,
        total=sched.steps,
        desc="target+draft",
        unit="step",
        dynamic_ncols=True,
        mininterval=2.0,
    )
    t0, tok = time.time(), 0
    for step in bar:
        lr = sched.lr_at(step)
        for opt in (opt_p, opt_q):
            for g in opt.param_groups:
                g["lr"] = lr
        xy = batch_at(data, sched, step)
        x, y = xy[:, :-1], xy[:, 1:]
        p_logits = f_p(input_ids=x).logits
        loss_p = F.cross_entropy(p_logits.flatten(0, 1).float(), y.flatten())
        loss_p.backward()
        torch.nn.utils.clip_grad_norm_(target.parameters(), 1.0)
        opt_p.step()
        opt_p.zero_grad(set_to_none=True)
        q_logits = f_q(input_ids=x).logits
        loss_q = kl_loss(p_logits.detach(), q_logits)
        loss_q.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt_q.step()
        opt_q.zero_grad(set_to_none=True)
        tok += x.numel()
        bar.set_postfix(
            loss_p=f"{loss_p.item():.3f}",
            kl_q=f"{loss_q.item():.3f}",
            tok_s=f"{tok / (time.time() - t0):.0f}",
            lr=f"{lr:.1e}",
            refresh=False,
        )
        if (step + 1) % sched.ckpt_every == 0 or step + 1 == sched.steps:
            save_state(
                state_path,
                {
                    "target": target.state_dict(),
                    "draft": draft.state_dict(),
                    "opt_p": opt_p.state_dict(),
                    "opt_q": opt_q.state_dict(),
                    "step": step + 1,
                },
            )
            if on_ckpt:
                on_ckpt(step + 1)


def _fit_draft(
    p_fn: Callable,
    q_fn: Callable,
    draft,
    sched: Schedule,
    work: Path,
    batch_fn: Callable,
    desc: str,
    upstream: str = "",
    on_ckpt: Callable[[int], None] | None = None,
) -> None:
    """The draft-only loop shared by ``distill_draft`` and ``greedy_tune``: ``distill_loss`` of
    ``q_fn(x)`` against the frozen ``p_fn(x)`` on ``batch_fn(step)``, resumable from
    ``work/state.pt``; a checkpoint tagged with another ``upstream`` is not resumed."""
    work.mkdir(parents=True, exist_ok=True)
    state_path = work / "state.pt"
    opt_q = make_optimizer(draft, sched)
    start = 0
    if state_path.exists():
        st = torch.load(state_path, weights_only=False)
        if st.get("upstream", upstream) == upstream:  # an untagged checkpoint resumes
            draft.load_state_dict(st["draft"])
            opt_q.load_state_dict(st["opt_q"])
            start = st["step"]
    draft.train()
    bar = tqdm(
        range(start, sched.steps),
        initial=start,
        total=sched.steps,
        desc=desc,
        unit="step",
        dynamic_ncols=True,
        mininterval=2.0,
    )
    t0, tok = time.time(), 0
    for step in bar:
        for g in opt_q.param_groups:
            g["lr"] = sched.lr_at(step)
        x = batch_fn(step)
        with torch.no_grad():
            p_logits = p_fn(input_ids=x).logits
        loss_q = distill_loss(p_logits, q_fn(input_ids=x).logits)
        loss_q.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt_q.step()
        opt_q.zero_grad(set_to_none=True)
        tok += x.numel()
        bar.set_postfix(loss=f"{loss_q.item():.3f}", tok_s=f"{tok / (time.time() - t0):.0f}", refresh=False)
        if (step + 1) % sched.ckpt_every == 0 or step + 1 == sched.steps:
            save_state(
                state_path,
                {"draft": draft.state_dict(), "opt_q": opt_q.state_dict(), "step": step + 1, "upstream": upstream},
            )
            if on_ckpt:
                on_ckpt(step + 1)


def distill_draft(
    target,
    draft,
    data: np.ndarray,
    sched: Schedule,
    work: Path,
    *,
    compile_: bool = True,
    on_ckpt: Callable[[int], None] | None = None,
) -> None:
    """Train the draft alone on KL(p || q) against the frozen target; resumable from ``work``."""
    target.eval()
    _fit_draft(
        _compiled(target, compile_),
        _compiled(draft, compile_),
        draft,
        sched,
        work,
        lambda step: batch_at(data, sched, step)[:, :-1],
        "distil draft",
        on_ckpt=on_ckpt,
    )


def greedy_tune(
    target,
    draft,
    greedy_ids: torch.Tensor,
    data: np.ndarray,
    sched: Schedule,
    work: Path,
    *,
    upstream: str = "",
    on_ckpt: Callable[[int], None] | None = None,
) -> None:
    """Fine-tune the draft on KL(p || q) + CE over half greedy-continuation, half corpus windows of
    ``greedy_ids.shape[1]`` tokens; resumable from ``work``. A checkpoint made after different
    earlier phases (``upstream``, e.g. their step counts) is not resumed: the tuning restarts."""
    target.eval()
    T, half = greedy_ids.shape[1], max(1, sched.batch // 2)

    def batch(step: int) -> torch.Tensor:
        rng = np.random.default_rng([sched.seed, 23, step])
        rows = greedy_ids[torch.from_numpy(rng.integers(0, len(greedy_ids), half))]
        starts = rng.integers(0, len(data) - T - 1, sched.batch - half)
        if not len(starts):
            return rows
        corpus = np.stack([np.asarray(data[i : i + T], dtype=np.int64) for i in starts])
        return torch.cat([rows, torch.from_numpy(corpus)])

    _fit_draft(target, draft, draft, sched, work, batch, "tune draft on greedy text", upstream, on_ckpt)
