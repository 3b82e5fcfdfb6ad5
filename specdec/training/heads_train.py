"""``specdec train medusa`` and ``specdec train eagle``: draft heads on the frozen target.

Contract: ``train_medusa(opt)`` / ``train_eagle(opt)`` build (or reuse) the shared feature sets
(``heads_prep``), train from a resumable checkpoint ``<cache>/<kind>/state.pt`` (saved every
``ckpt_every`` steps; batches are drawn by an RNG seeded with the step, so a resumed run sees the
same data; ``opt.max_minutes``, where set, stops it early, checkpointed), measure held-out
accuracy per head / per depth and write an fp16 folder ``<out>/<kind>`` with ``card.json`` and
``README.md``. Medusa also chooses its candidate tree from
the measured per-head top-k accuracies (``paths.best_tree``) and stores it as ``tree.json``.

Losses (the target is frozen; p_j = softmax(target LM head(h_j)), the target's own distribution):
- Medusa head k at position t: KL(p_{t+k} || q_k(h_t)) + 0.5 CE(argmax p_{t+k}), heads weighted
  0.8^(k-1) (self-distillation on the target's distributions and its greedy continuations).
- EAGLE at position j: SmoothL1(f_hat_{j+1}, h_{j+1}) + w_token (KL(p_{j+1} || LM head(f_hat_{j+1}))
  + 0.5 CE(argmax)), over ``unroll`` passes: pass 2 feeds the layer its own pass-1 prediction
  while attending to real features before it, exactly what a depth-1 draft node sees.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from specdec.proposers.eagle import EagleLayer
from specdec.proposers.folder import param_count, save_module
from specdec.proposers.medusa import MedusaHeads
from specdec.proposers.medusa.paths import best_tree, expected_length, joint_from_ranks, save_paths
from specdec.training.heads_prep import HeadsData, feature_sets, load_target
from specdec.training.lm import Schedule, make_optimizer, save_state


@dataclass
class HeadsOptions(HeadsData):
    out: Path = Path("assets")
    steps: int = 3000
    batch: int = 1024  # positions per step (EAGLE: batch // window windows)
    window: int = 128
    lr: float = 1e-3
    greedy_fraction: float = 0.375
    n_heads: int = 4
    top_k_eval: int = 10
    nodes: int = 24
    node_cost: float = 0.03  # verification cost per tree node / cost of a decoding step (measured, CPU)
    head_cost: float = 0.065  # cost of one Medusa head (block + d x V projection) / a decoding step
    unroll: int = 2
    w_token: float = 0.5
    ckpt_every: int = 25
    extra: dict = field(default_factory=dict)


def _pool(sets: dict) -> tuple[torch.Tensor, torch.Tensor, int]:
    g, c = sets["greedy"], sets["corpus"]
    return torch.cat([g["ids"], c["ids"]]), torch.cat([g["hidden"], c["hidden"]]), len(g["ids"])


def _rows(pool, opt: HeadsOptions, step: int, n: int) -> tuple[np.random.Generator, torch.Tensor]:
    """``n`` window indices, ``greedy_fraction`` of them from the greedy continuations."""
    ids, _, n_greedy = pool
    rng = np.random.default_rng([opt.seed, 99, step])
    n_g = int(round(n * opt.greedy_fraction))
    return rng, torch.from_numpy(
        np.concatenate([rng.integers(0, n_greedy, n_g), rng.integers(n_greedy, len(ids), n - n_g)])
    )


def medusa_batch(pool, opt: HeadsOptions, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` random positions t: (h_t [B, H], h_{t+1..t+K} [B, K, H]); greedy windows only from
    their continuation region, where the future tokens are the target's own greedy choices."""
    ids, hid, n_greedy = pool
    rng, rows = _rows(pool, opt, step, opt.batch)
    T, K = hid.shape[1], opt.n_heads
    lo = np.where(rows.numpy() < n_greedy, opt.prefix - 1, 0)
    t = torch.from_numpy(rng.integers(lo, T - K))
    span = t[:, None] + torch.arange(K + 1)[None]
    h = hid[rows[:, None], span].float()
    return h[:, 0], h[:, 1:]


def eagle_batch(pool, opt: HeadsOptions, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch // window`` windows of ``window`` tokens (ids, hidden), at random offsets."""
    ids, hid, _ = pool
    rng, rows = _rows(pool, opt, step, max(1, opt.batch // opt.window))
    off = torch.from_numpy(rng.integers(0, ids.shape[1] - opt.window + 1, len(rows)))
    span = off[:, None] + torch.arange(opt.window)[None]
    return ids[rows[:, None], span], hid[rows[:, None], span].float()


def _token_loss(logits: torch.Tensor, p_logits: torch.Tensor) -> torch.Tensor:
    log_q = F.log_softmax(logits.float().flatten(0, -2), -1)
    log_p = F.log_softmax(p_logits.float().flatten(0, -2), -1)
    kl = F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")
    return kl + 0.5 * F.nll_loss(log_q, log_p.argmax(-1))


def medusa_loss(heads: MedusaHeads, lm_head, h: torch.Tensor, future: torch.Tensor) -> torch.Tensor:
    """h [B, H] at t, future [B, K, H] at t+1..t+K; head k learns p_{t+k} (the law of x_{t+k+1})."""
    out = heads(h)  # [B, K, V]
    with torch.no_grad():
        p_logits = lm_head(future[:, : heads.n_heads])
    return sum(0.8**k * _token_loss(out[:, k], p_logits[:, k]) for k in range(heads.n_heads))


def unrolled(layer: EagleLayer, f: torch.Tensor, e: torch.Tensor, passes: int) -> list[torch.Tensor]:
    """Predicted f_{j+1} per pass. Pass p >= 2 at position j takes pass p-1's prediction of f_j and
    attends to pass-1 keys before j-p+2 and to pass-i keys at j-p+i (i = 2..p): a depth-(p-1)
    draft node's view (real context, then its own chain of predicted ancestors)."""
    T = f.shape[1]
    pos = torch.arange(T)
    outs, ks, vs = [], [], []
    feat = f
    for p in range(1, passes + 1):
        x = layer.fc(torch.cat([feat, e], -1))
        q, k, v = layer.qkv_at(x, pos)
        ks.append(k)
        vs.append(v)
        gap = pos[:, None] - pos[None]  # query position minus key position
        vis = [gap >= p - 1] + [gap == p - i for i in range(2, p + 1)]
        att = F.scaled_dot_product_attention(q, torch.cat(ks, -2), torch.cat(vs, -2), attn_mask=torch.cat(vis, -1))
        out = layer.out(x, att)
        outs.append(out)
        feat = torch.cat([f[:, :1], out[:, :-1]], 1)  # position j gets the prediction of f_j
    return outs


def eagle_loss(
    layer: EagleLayer, embed, lm_head, ids: torch.Tensor, hid: torch.Tensor, opt: HeadsOptions
) -> torch.Tensor:
    e = embed(ids[:, 1:])  # embedding of x_{j+1}
    f, target = hid[:, :-1], hid[:, 1:]
    with torch.no_grad():
        p_logits = lm_head(target)
    total = 0.0
    for p, out in enumerate(unrolled(layer, f, e, opt.unroll)):
        skip = p  # pass p+1 has no valid input at the first p positions
        reg = F.smooth_l1_loss(out[:, skip:], target[:, skip:])
        total = total + (0.7**p) * (reg + opt.w_token * _token_loss(lm_head(out[:, skip:]), p_logits[:, skip:]))
    return total


def _validate(module: torch.nn.Module, val_fn, step: int, best: dict | None, desc: str, tag) -> dict | None:
    """Early stopping: the validation loss now, and the best weights seen so far (by that loss on
    the same validation data: ``tag`` names it, and a best from other data is forgotten)."""
    if val_fn is None:
        return best
    if best is not None and best.get("tag") != tag:
        best = None
    module.eval()
    with torch.no_grad():
        v = float(val_fn())
    module.train()
    if best is None or v < best["val"]:
        state = {k: t.detach().clone() for k, t in module.state_dict().items()}
        best = {"val": v, "step": step, "module": state, "tag": tag}
    tqdm.write(f"{desc} step {step}: validation loss {v:.4f} (best {best['val']:.4f} at step {best['step']})")
    return best


def fit(
    module: torch.nn.Module, loss_fn, batch_fn, opt: HeadsOptions, work: Path, desc: str, val_fn=None, val_tag=None
) -> None:
    """Train ``module``; with ``val_fn`` (a validation loss), checked at every checkpoint, the
    module ends with the weights of the best checkpoint (early stopping, kept in the state)."""
    work.mkdir(parents=True, exist_ok=True)
    state_path = work / "state.pt"
    sched = Schedule(
        steps=opt.steps,
        batch=opt.batch,
        lr=opt.lr,
        warmup=min(20, opt.steps // 10 + 1),
        weight_decay=0.0,
        seed=opt.seed,
    )
    optim = make_optimizer(module, sched)
    start, best = 0, None
    if state_path.exists():
        st = torch.load(state_path, weights_only=False)
        module.load_state_dict(st["module"])
        optim.load_state_dict(st["optim"])
        start, best = st["step"], st.get("best")
        if val_tag is not None and best is not None and best.get("tag") != val_tag:
            tqdm.write(
                f"{desc}: this checkpoint was validated on another split or loss ({best.get('tag')!r}, now "
                f"{val_tag!r}); early stopping starts over from here. If the split changed, its training may have "
                "seen today's validation answers, which would flatter the first checks and make early stopping "
                f"keep them: for a clean validation start cold (remove {state_path})"
            )
    module.train()
    limit = float(getattr(opt, "max_minutes", 0) or 0) * 60  # a wall-clock cap (0 = none)
    t0 = time.time()
    bar = tqdm(
        range(start, opt.steps),
        initial=start,
        total=opt.steps,
        desc=desc,
        unit="step",
        dynamic_ncols=True,
        mininterval=5.0,
    )
    for step in bar:
        for g in optim.param_groups:
            g["lr"] = sched.lr_at(step)
        loss = loss_fn(*batch_fn(step))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optim.step()
        optim.zero_grad(set_to_none=True)
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
        late = limit > 0 and time.time() - t0 > limit
        if (step + 1) % opt.ckpt_every == 0 or step + 1 == opt.steps or late:
            best = _validate(module, val_fn, step + 1, best, desc, val_tag)
            state = {"module": module.state_dict(), "optim": optim.state_dict(), "step": step + 1, "best": best}
            save_state(state_path, state)
        if late:
            print(f"{desc}: stopped at step {step + 1} of {opt.steps} after {limit / 60:g} min (re-run resumes)")
            break
    if best is not None and best.get("tag") == val_tag:
        module.load_state_dict(best["module"])
    module.eval()


@torch.no_grad()
def rank_accuracy(pred_logits: torch.Tensor, labels: torch.Tensor, top: int) -> list[float]:
    """acc[r] = P(label is the rank-r candidate), r < top, over all positions given."""
    ranks = pred_logits.topk(top, -1).indices  # [..., top]
    hit = ranks == labels[..., None]
    return hit.float().flatten(0, -2).mean(0).tolist()


@torch.no_grad()
def medusa_eval(heads: MedusaHeads, held: dict, opt: HeadsOptions) -> tuple[list[list[float]], list[list[int]]]:
    """acc[i][r] on held-out greedy continuations (positions t whose future is target-generated),
    and per position the rank of the true token under each head (-1 = outside the top k)."""
    ids, hid = held["ids"], held["hidden"].float()
    t0 = opt.prefix - 1  # h_t with t >= prefix - 1 predicts continuation tokens
    K = heads.n_heads
    n = hid.shape[1] - t0 - K - 1  # positions whose labels x_{t+2..t+1+K} all exist
    out = heads(hid[:, t0 : t0 + n])  # [B, n, K, V]
    acc, ranks = [], []
    for k in range(1, K + 1):
        labels = ids[:, t0 + 1 + k : t0 + 1 + k + n]
        acc.append(rank_accuracy(out[:, :, k - 1], labels, opt.top_k_eval))
        hit = out[:, :, k - 1].topk(opt.top_k_eval, -1).indices == labels[..., None]
        ranks.append(torch.where(hit.any(-1), hit.float().argmax(-1), torch.tensor(-1.0)).long().flatten())
    return acc, torch.stack(ranks, 1).tolist()


@torch.no_grad()
def eagle_eval(layer: EagleLayer, embed, lm_head, held: dict, opt: HeadsOptions, depths: int = 3) -> list[list[float]]:
    """acc[d][r] at draft depth d+1 (chain of predicted features), on the continuation region."""
    ids, hid = held["ids"], held["hidden"].float()
    outs = unrolled(layer, hid[:, :-1], embed(ids[:, 1:]), depths)
    t0 = opt.prefix - 1
    acc = []
    for d, out in enumerate(outs):  # out[:, j] predicts f_{j+1}, i.e. the token x_{j+2}
        lo = t0 + d  # pass d+1 at j is a depth-d node of a draft made at t = j - d
        acc.append(rank_accuracy(lm_head(out[:, lo:-1]), ids[:, lo + 2 :], opt.top_k_eval))
    return acc


def _card(kind: str, module, opt: HeadsOptions, acc, seconds: float, **more) -> dict:
    key = "head" if kind == "medusa" else "depth"
    card = {
        "name": f"specdec {kind}",
        "parameters": param_count(module),
        "train_seconds": round(seconds),
        "options": json.loads(json.dumps(asdict(opt), default=str)),
        f"heldout_top1_per_{key}": [round(a[0], 4) for a in acc],
        f"heldout_top{opt.top_k_eval}_per_{key}": [round(sum(a), 4) for a in acc],
        f"heldout_rank_accuracy_per_{key}": [[round(x, 4) for x in a] for a in acc],
    }
    card.update(more)
    return card


def train_medusa(opt: HeadsOptions) -> dict:
    t0 = time.time()
    target = load_target(opt.target)
    sets = feature_sets(opt, target)
    cfg = target.config
    heads = MedusaHeads(cfg.hidden_size, cfg.vocab_size, opt.n_heads)
    heads.init_from_lm_head(target.get_output_embeddings().weight)
    lm_head = target.get_output_embeddings()
    pool = _pool(sets)
    fit(
        heads,
        lambda h, fut: medusa_loss(heads, lm_head, h, fut),
        lambda s: medusa_batch(pool, opt, s),
        opt,
        opt.cache / "medusa",
        "medusa",
    )
    acc, ranks = medusa_eval(heads, sets["heldout"], opt)
    joint = joint_from_ranks(ranks)  # measured path probabilities: heads are not independent
    paths = best_tree(joint, opt.nodes, opt.node_cost, opt.head_cost)
    e = expected_length(paths, joint)
    card = _card(
        "medusa",
        heads,
        opt,
        acc,
        time.time() - t0,
        tree_nodes=len(paths),
        tree_expected_accepted=round(e, 3),
        tree_expected_tau=round(e + 1, 3),
        description=f"{opt.n_heads} Medusa heads (residual SiLU block + vocabulary projection) on the "
        "frozen target's last hidden state, self-distilled on its distributions and greedy "
        "continuations; head k predicts the token k+1 positions ahead.",
    )
    save_module(heads, opt.out / "medusa", card)
    save_paths(
        opt.out / "medusa" / "tree.json",
        paths,
        expected_accepted=round(e, 3),
        budget=opt.nodes,
        node_cost=opt.node_cost,
        head_cost=opt.head_cost,
        expected_accepted_independent=round(expected_length(paths, acc), 3),
        chosen_by="specdec.proposers.medusa.paths.best_tree on the measured joint path probabilities of "
        "held-out greedy continuations (see card.json for the per-head accuracies)",
    )
    print(json.dumps({k: card[k] for k in card if k.startswith("heldout_top") or k.startswith("tree")}), flush=True)
    return card


def train_eagle(opt: HeadsOptions) -> dict:
    t0 = time.time()
    target = load_target(opt.target)
    sets = feature_sets(opt, target)
    cfg = target.config
    layer = EagleLayer(
        cfg.hidden_size,
        cfg.num_attention_heads,
        cfg.intermediate_size,
        cfg.rms_norm_eps,
        float(cfg.rope_parameters["rope_theta"]) if getattr(cfg, "rope_parameters", None) else 10000.0,
    )
    embed, lm_head = target.get_input_embeddings(), target.get_output_embeddings()
    pool = _pool(sets)
    fit(
        layer,
        lambda ids, hid: eagle_loss(layer, embed, lm_head, ids, hid, opt),
        lambda s: eagle_batch(pool, opt, s),
        opt,
        opt.cache / "eagle",
        "eagle",
    )
    acc = eagle_eval(layer, embed, lm_head, sets["heldout"], opt)
    card = _card(
        "eagle",
        layer,
        opt,
        acc,
        time.time() - t0,
        description="One decoder layer over (target feature f_t, embedding of x_{t+1}) predicting f_{t+1}; "
        "tokens from the target's frozen LM head. Trained on feature regression plus token "
        "KL/cross-entropy against the frozen target. Depth d accuracy uses d chained predicted "
        "features over real context.",
    )
    save_module(layer, opt.out / "eagle", card)
    print(json.dumps({k: card[k] for k in card if k.startswith("heldout_top")}), flush=True)
    return card
