"""Held-out quality of the shipped models, written to a model card in each model folder.

Contract: ``evaluate_pair(target, draft, heldout)`` returns held-out cross-entropy (nats/token) of
both models and the draft's greedy next-token agreement with the target (teacher-forced on held-out
code), averaged over fixed windows; ``write_card(dir, card)`` writes ``card.json`` and a README.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F


@torch.no_grad()
def evaluate_pair(target, draft, heldout: np.ndarray, windows: int = 64, seq_len: int = 512) -> dict:
    target.eval()
    draft.eval()
    rng = np.random.default_rng(1234)
    starts = rng.integers(0, len(heldout) - seq_len - 1, size=windows)
    tot_p = tot_q = agree = n = 0.0
    for s in starts:
        xy = torch.from_numpy(np.asarray(heldout[s : s + seq_len + 1], dtype=np.int64))[None]
        x, y = xy[:, :-1], xy[:, 1:]
        lp = target(input_ids=x).logits.float()
        lq = draft(input_ids=x).logits.float()
        tot_p += F.cross_entropy(lp[0], y[0], reduction="sum").item()
        tot_q += F.cross_entropy(lq[0], y[0], reduction="sum").item()
        agree += (lp.argmax(-1) == lq.argmax(-1)).sum().item()
        n += y.numel()
    return {
        "heldout_loss_target": tot_p / n,
        "heldout_loss_draft": tot_q / n,
        "loss_gap": (tot_q - tot_p) / n,
        "greedy_agreement": agree / n,
        "eval_tokens": int(n),
    }


def write_card(out: Path, card: dict) -> None:
    (out / "card.json").write_text(json.dumps(card, indent=2, sort_keys=True))
    lines = [
        f"# {card.get('name', out.name)}",
        "",
        card.get("description", ""),
        "",
        "Trained by `specdec train` (see docs/training.md). Measured on held-out files:",
        "",
    ]
    for k, v in sorted(card.items()):
        if isinstance(v, (int, float, str)) and k not in ("name", "description"):
            lines.append(f"- {k}: {v:.4f}" if isinstance(v, float) else f"- {k}: {v}")
    (out / "README.md").write_text("\n".join(lines) + "\n")
