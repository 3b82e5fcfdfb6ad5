"""Medusa: a fixed candidate tree filled from the heads' top-k tokens (Cai et al., 2024).

Contract: ``Medusa(heads, paths, vocab)`` holds the trained heads (``heads.py``) and a
candidate tree given as index paths (``paths.py``; the shipped ``tree.json`` was chosen
by ``specdec train medusa`` from held-out accuracies, a hand-written list loads the same way).
``propose(ctx)`` reads the target's last hidden state at the position that produced the pending
token (``ctx.hidden[-1]``), takes each head's top-R tokens, and returns the tree with node
``(r_1, ..., r_d)`` holding head d's rank-r_d token, cut to the first ``budget`` nodes in tree
order (depth, then rank: still a valid tree), and to ``ctx.k_max`` nodes when the request sets k.
With k = "auto" a step is plain whenever the measured rates say the tree does not pay
(``proposers/fallback.py``; ``chose_plain`` feeds ``Stats.auto_plain``). That fallback is the one
per-request state (``batch.MedusaState``): the proposer holds the solo request's (``state``), and
``propose(ctx)`` is the batch of one through the batch form (``batch.BatchMedusa``), which runs
``tree(ctx)`` for one request and the heads batched over many.
The draft is deterministic (q = None), so the
shared verifier accepts exactly and the output is the target's distribution at every
temperature; the tokens never depend on the verifier's random numbers. Decoding reads the heads'
weights through ``packed.Linear`` built at construction (packed ones are copies): train first, then build.
A draft vocabulary (``draft_vocab.json`` in the folder, or ``set_vocab``: FR-Spec,
``proposers/vocab_subset.py``) reads the projections on those rows only; ``top_tokens`` maps the
heads' ranks back to token ids for the solo tree and the batch's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from specdec.core.proposer import Context
from specdec.core.tree import Draft
from specdec.fast import lowp
from specdec.models import packed as P
from specdec.proposers import vocab_subset
from specdec.proposers.medusa.batch import BatchMedusa, MedusaState
from specdec.proposers.medusa.heads import MedusaHeads
from specdec.proposers.medusa.paths import load_paths, tree_order

TREE_FILE = "tree.json"


class Medusa:
    name = "medusa"

    def __init__(self, heads: MedusaHeads, paths: Sequence[Sequence[int]], vocab: int | None = None) -> None:
        self.heads = heads.eval()
        # decoding reads snapshots of the weights, each linear on its cheaper path (packed.Linear)
        packed: dict[int, P.Linear] = {}  # tied heads share one packed LM head
        self._pairs = [
            (P.Linear(b.weight, b.bias), packed.setdefault(id(p), P.Linear(p.weight)))
            for b, p in zip(heads.block, heads.projections)
        ]
        self.tied = heads.proj is None  # one LM-head product for every head's row
        self.vocab = vocab
        self.vocab_ids: torch.Tensor | None = None  # a draft vocabulary (set_vocab), None: all tokens
        self._full = [proj for _, proj in self._pairs]
        self.state = MedusaState()  # the solo request's auto-k fallback; a batch row holds its own
        self.form = BatchMedusa(self)  # the one proposal, for the solo request too (batch.py)
        self.set_paths(paths)

    @classmethod
    def load(
        cls, folder: Path, target_model: torch.nn.Module, vocab: int | None = None, tree: Path | None = None
    ) -> Medusa:
        w = target_model.get_output_embeddings().weight
        heads = MedusaHeads.load(folder, w.device, w.dtype, target_model)
        medusa = cls(heads, load_paths(tree or Path(folder) / TREE_FILE), vocab)
        medusa.set_vocab(vocab_subset.load(folder))
        return medusa

    def set_vocab(self, ids: torch.Tensor | None) -> None:
        """Draft from the token ids ``ids`` only (FR-Spec, ``proposers/vocab_subset.py``): each
        projection read on those rows; None: the whole vocabulary."""
        vocab = self.vocab or self._full[0].weight.shape[0]
        self.vocab_ids = ids
        cut: dict[int, P.Linear] = {}  # tied heads still share one (reduced) projection
        for p in self._full if ids is not None else []:
            cut.setdefault(id(p), vocab_subset.SubsetHead(p, ids, vocab).linear)
        projs = self._full if ids is None else [cut[id(p)] for p in self._full]
        self._pairs = [(block, proj) for (block, _), proj in zip(self._pairs, projs)]

    def top_tokens(self, h: torch.Tensor, deepest: int) -> torch.Tensor:
        """Each head's ``top`` most likely token ids, [..., deepest, top], on the CPU."""
        logits = self.head_logits(h, deepest)
        if self.vocab_ids is None and self.vocab:
            logits = logits[..., : self.vocab]
        top = logits.topk(self.top, dim=-1).indices
        return (top if self.vocab_ids is None else self.vocab_ids[top]).cpu()

    def set_paths(self, paths: Sequence[Sequence[int]]) -> None:
        """Use another candidate tree (index paths); raises ValueError for an invalid one."""
        ordered, parents = tree_order(paths)
        deepest = max(len(p) for p in ordered)
        if deepest > self.heads.n_heads:
            raise ValueError(f"the tree is {deepest} deep but there are only {self.heads.n_heads} Medusa heads")
        self.paths, self.parents = ordered, parents
        self.depth = torch.tensor([len(p) - 1 for p in ordered])
        self.rank = torch.tensor([p[-1] for p in ordered])
        self.top = max(p[-1] for p in ordered) + 1

    @property
    def precisions(self) -> tuple[str, ...]:
        """The heads' weight precisions here (``lowp.py``; the draft is deterministic, so any is exact)."""
        return lowp.precisions(self.heads.projections[0].weight)

    def set_precision(self, precision: str, keep: bool = False) -> None:
        lowp.set_all(self._pairs, precision, keep)

    @property
    def n_nodes(self) -> int:
        return len(self.paths)

    @property
    def chose_plain(self) -> bool:
        """Whether the solo request's last step was a plain one auto k chose (``Stats.auto_plain``)."""
        return self.state.chose_plain

    def propose(self, ctx: Context) -> Draft:
        """The solo request's draft: the batch of one (``BatchMedusa.propose``, which runs ``tree``)."""
        return self.form.propose([self.state], [ctx])[0]

    def head_logits(self, h: torch.Tensor, deepest: int) -> torch.Tensor:
        """Heads 1..deepest on h [..., H] -> [..., deepest, V]; tied heads in one LM-head product."""
        pairs = self._pairs[:deepest]
        if self.tied:
            return pairs[0][1](torch.stack([h + F.silu(block(h)) for block, _ in pairs], -2))
        return torch.stack([proj(h + F.silu(block(h))) for block, proj in pairs], -2)

    @torch.inference_mode()
    def tree(self, ctx: Context) -> Draft:
        """One request's tree (the computation a batch of one runs; ``batch.py`` batches many)."""
        n = min(self.n_nodes, ctx.budget, ctx.k_max or self.n_nodes)
        if n <= 0 or ctx.hidden is None or len(ctx.hidden) == 0:
            return Draft.empty()  # a one-token prompt has no hidden state yet: a plain step
        w = self.heads.projections[0].weight
        deepest = int(self.depth[:n].max()) + 1  # only the heads the (cut) tree reaches
        h = ctx.hidden[-1].to(device=w.device, dtype=w.dtype)
        top = self.top_tokens(h, deepest)  # [K, R]
        tokens = top[self.depth[:n], self.rank[:n]]
        return Draft(tokens, tuple(self.parents[:n]))
