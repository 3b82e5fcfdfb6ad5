"""Per-position acceptance of our models as greedy top-1 chains of k tokens: what vLLM should measure.

Contract: ``ChainModels.load(assets)`` loads the target (fp32, transformers), the draft, the Medusa
heads and the EAGLE layer; ``chain_steps(models, method, seq, n_prompt, n_new, k)`` replays chain
verification at temperature 0 over a known greedy sequence ``seq`` (prompt + at least n_new + k + 1
generated tokens): the prefill makes token n_prompt, then each step drafts k top-1 tokens
(``draft``: the draft model's greedy continuation; ``medusa``: head d's top-1 on the hidden state of
the last verified position; ``eagle``: the EAGLE layer run autoregressively on target features and
its own predicted ones), accepts the prefix matching ``seq`` and adds one target token, until
n_new tokens exist. It returns each step's accepted count, vLLM's ``per_step_accepted``.
``alpha_per_position(steps, k)`` is P(accepted at depth i). Why a replay: vLLM 0.32 verifies chains
only, while our engine runs Medusa and EAGLE as trees; the replay is our chain of the same length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass
class ChainModels:
    target: torch.nn.Module
    draft: torch.nn.Module
    medusa: torch.nn.Module
    eagle: torch.nn.Module

    @classmethod
    def load(cls, assets: Path) -> ChainModels:
        from transformers import AutoModelForCausalLM

        from specdec.proposers.eagle.layer import EagleLayer
        from specdec.proposers.medusa.heads import MedusaHeads

        def lm(name: str):
            return AutoModelForCausalLM.from_pretrained(assets / name, dtype=torch.float32).eval()

        return cls(lm("target"), lm("draft"), MedusaHeads.load(assets / "medusa"), EagleLayer.load(assets / "eagle"))


@torch.no_grad()
def _hidden(model, seq: list[int]) -> torch.Tensor:
    """The target's last hidden state (the LM head's input) at every position [T, H]."""
    return model.model(torch.tensor([seq])).last_hidden_state[0]


@torch.no_grad()
def _draft_chain(m: ChainModels, seq: list[int], L: int, k: int, h: torch.Tensor) -> list[int]:
    out = m.draft.generate(torch.tensor([seq[:L]]), max_new_tokens=k, min_new_tokens=k, do_sample=False)
    return out[0, L:].tolist()


@torch.no_grad()
def _medusa_chain(m: ChainModels, seq: list[int], L: int, k: int, h: torch.Tensor) -> list[int]:
    return m.medusa(h[L - 2])[:k].argmax(-1).tolist()  # head d on h_{L-2} predicts seq[L - 1 + d]


@torch.no_grad()
def _eagle_chain(m: ChainModels, seq: list[int], L: int, k: int, h: torch.Tensor) -> list[int]:
    """The prefix (f_j, e_{j+1}) for j < L - 1 in one causal pass, then k drafts on its keys and values."""
    import torch.nn.functional as F

    layer, embed = m.eagle, m.target.get_input_embeddings().weight
    lm_head = m.target.get_output_embeddings().weight
    x = layer.fc(torch.cat([h[: L - 1], embed[torch.tensor(seq[1:L])]], -1))[None]
    q, keys, values = layer.qkv_at(x, torch.arange(L - 1))
    pred = layer.out(x, F.scaled_dot_product_attention(q, keys, values, is_causal=True))[0, -1]
    out = []
    for i in range(k):
        tok = int((pred @ lm_head.T).argmax())
        out.append(tok)
        if i == k - 1:
            break
        x = layer.fc(torch.cat([pred, embed[tok]]))[None, None]
        q, kn, vn = layer.qkv_at(x, torch.tensor([L - 1 + i]))
        keys, values = torch.cat([keys, kn], -2), torch.cat([values, vn], -2)
        pred = layer.out(x, F.scaled_dot_product_attention(q, keys, values))[0, -1]
    return out


CHAINS = {"draft": _draft_chain, "medusa": _medusa_chain, "eagle": _eagle_chain}


def chain_steps(m: ChainModels, method: str, seq: list[int], n_prompt: int, n_new: int, k: int) -> list[int]:
    if len(seq) < n_prompt + n_new + k + 1:
        raise ValueError("seq needs n_new + k + 1 generated tokens")
    h = _hidden(m.target, [max(t, 0) for t in seq])  # padding (-1: never matches) read as token 0; causal
    L, steps = n_prompt + 1, []  # the prefill made seq[n_prompt]
    while L < n_prompt + n_new:
        chain = CHAINS[method](m, seq, L, k, h)
        a = 0
        while a < k and chain[a] == seq[L + a]:
            a += 1
        steps.append(a)
        L += a + 1
    return steps


def alpha_per_position(steps: list[int], k: int) -> list[float]:
    return [sum(a >= i for a in steps) / len(steps) for i in range(1, k + 1)] if steps else [0.0] * k
