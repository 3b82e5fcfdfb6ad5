"""Batches and losses for training Medusa, EAGLE and a draft model on self-distilled chat text.

Contract (all on a ``ChatSet`` from ``chat_data.py``; the target is frozen; its text is greedy, so
the label at every position is the target's own argmax: CE on it is distillation at temperature 0):
- ``medusa_positions(cs, K)`` -> (h [P, H] fp16, labels [P, K]): every position t whose output is
  a completion token, head k's label x_{t+1+k} (-100 past the row's end).
- ``medusa_loss(heads, w_s, h, labels)``: sum_k 0.8^(k-1) CE(W_S (h + SiLU(A_k h + b_k)), label),
  W_S the LM head's rows of the vocabulary subset, labels remapped into it.
- ``eagle_loss(layer, embed, w_s, ids, hid, start, end, unroll)``: per pass p of ``unrolled``,
  SmoothL1(f_hat_{j+1}, f_{j+1}) + 0.5 CE(W_S f_hat_{j+1}, x_{j+2}) over completion positions.
- ``draft_loss(model, subset, proj, ids, hid, start, end)``: CE of the draft's next token over
  the subset plus SmoothL1 of its last hidden state to the target's, projected (``proj``).
- ``rows_batch(cs, step, n, seed)``: ``n`` rows drawn by an RNG seeded with the step (a resumed
  run sees the same batches), cut to the longest of them.
Why one CE and no KL: the full target distribution would cost an LM-head pass over 49,152
tokens per position, and at temperature 0 only the argmax is checked.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from specdec.training.chat_data import ChatSet, remap
from specdec.training.heads_train import unrolled


def medusa_positions(cs: ChatSet, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    hs, labs = [], []
    for i in range(len(cs)):
        s, e = int(cs.start[i]), int(cs.end[i])
        t = torch.arange(s, e)
        idx = t[:, None] + 1 + torch.arange(1, K + 1)[None]  # x_{t+1+k}
        lab = torch.where(idx <= e, cs.ids[i, idx.clamp(max=cs.ids.shape[1] - 1)], torch.tensor(-100))
        hs.append(cs.hidden[i, s:e])
        labs.append(lab)
    return torch.cat(hs), torch.cat(labs)


def _ce(logits: torch.Tensor, labels: torch.Tensor, subset: torch.Tensor) -> torch.Tensor:
    ok = labels >= 0
    lab = torch.where(ok, remap(labels.clamp(min=0), subset), torch.tensor(-100))
    return F.cross_entropy(logits.float().flatten(0, -2), lab.flatten(), ignore_index=-100)


def medusa_loss(heads, w_s: torch.Tensor, subset: torch.Tensor, h: torch.Tensor, labels: torch.Tensor):
    total = 0.0
    for k, block in enumerate(heads.block):
        z = h + F.silu(block(h))
        total = total + 0.8**k * _ce(z @ w_s.T, labels[:, k], subset)
    return total


def positions_batch(h: torch.Tensor, labels: torch.Tensor, step: int, n: int, seed: int):
    rng = np.random.default_rng([seed, 7, step])
    idx = torch.from_numpy(rng.integers(0, len(h), n))
    return h[idx].float(), labels[idx]


def rows_batch(cs: ChatSet, step: int, n: int, seed: int):
    rng = np.random.default_rng([seed, 11, step])
    rows = torch.from_numpy(rng.integers(0, len(cs), n))
    T = int(cs.end[rows].max())
    return cs.ids[rows, : T + 1], cs.hidden[rows, :T].float(), cs.start[rows], cs.end[rows]


def eagle_loss(layer, embed, w_s, subset, ids, hid, start, end, unroll: int = 2, w_token: float = 0.5):
    """ids [R, T+1], hid [R, T]: f_j = hid[j], e_{j+1} = embed(x_{j+1}), target f_{j+1}, x_{j+2}."""
    T = hid.shape[1]
    with torch.no_grad():
        e = embed(ids[:, 1:T])
    f, tgt, lab = hid[:, :-1], hid[:, 1:], ids[:, 2 : T + 1]
    j = torch.arange(T - 1)[None]
    base = (j >= start[:, None] - 1) & (j + 1 < end[:, None])  # x_{j+2} is completion text
    total = 0.0
    for p, out in enumerate(unrolled(layer, f, e, unroll)):
        m = base & (j >= p)
        reg = F.smooth_l1_loss(out[m], tgt[m])
        tok = _ce(out[m] @ w_s.T, lab[m], subset)
        total = total + 0.7**p * (reg + w_token * tok)
    return total


def draft_loss(model, subset, proj, ids, hid, start, end, w_feat: float = 1.0):
    """CE of q's next token (the target's greedy one) at completion positions, over the subset,
    plus SmoothL1 of the draft's last hidden state to the target's projected on the draft's
    embedding directions (``proj`` [W, H]): with the draft's embedding E V^T, a draft state
    V h_target gives logits E V^T V h_target, the target's own up to the dropped directions."""
    T = ids.shape[1] - 1
    h = model.model(input_ids=ids[:, :T]).last_hidden_state
    j = torch.arange(T)[None]
    m = (j >= start[:, None]) & (j < end[:, None])
    w_s = model.get_output_embeddings().weight[subset]
    feat = F.smooth_l1_loss(h[m], hid[m] @ proj.T)
    return _ce(h[m] @ w_s.T, ids[:, 1 : T + 1][m], subset) + w_feat * feat
