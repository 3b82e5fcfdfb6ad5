"""EAGLE: draft at the feature level with one trained layer, grow a dynamic tree (Li et al., 2024).

Contract: ``Eagle(layer, embed, lm_head, vocab)`` holds the trained ``EagleLayer`` and the
target's own (frozen) input embedding and LM head (the ``packed.Linear`` the target hands over,
``Target.head``, whose packed copy the target's own step reads; or an ``nn.Linear`` or a weight).
These and the tree's settings are shared by every request; what follows one request is an
``EagleState`` (``state.py``): a KV cache of the layer over the pairs (f_j, x_{j+1}) of its committed
text, f_j being the target's last hidden state at position j (``ctx.hidden``), resynchronised by
longest common prefix on every call (no commit or rollback hooks), and auto k's fallback. The
proposer holds the solo request's (``state``); ``propose(ctx)`` is the batch of one through its form
(``batch.BatchEagle.propose([state], [ctx])``), which runs ``tree(ctx, state)`` for one state:

1. feeds the pairs not yet cached; the output at the last pair (f_t, pending token) is the
   predicted feature f_{t+1}, whose LM-head distribution proposes depth 1;
2. EAGLE-2's dynamic tree: a node's value is the product of draft probabilities along its path
   (the draft's own confidence, log-summed); at each depth the ``beam`` most valuable new nodes
   are fed through the layer together (tree attention mask: real context, their ancestors,
   themselves; position = t + depth) and each proposes its ``top_k`` most likely children, for
   ``depth`` levels or until the best frontier value is below ``max(node_cost, expand_min)``:
   each level costs a layer forward plus the LM head over the beam (a fraction of a target
   forward: docs/heads.md), worth it only for nodes likely to be accepted (``expand_min`` ~ that
   cost times the speedup a step already makes);
3. the ``nodes`` most valuable nodes overall (never a child without its parent), cut to the
   prefix that maximises the predicted speedup (1 + sum of values) / (1 + node_cost n), form the
   draft, siblings ordered by value. ``node_cost`` is the verifier's measured extra cost of one
   node relative to a decoding step (0 = always the full budget); a frontier whose best value is
   below it is not expanded further.

A draft vocabulary (``draft_vocab.json`` in the folder: FR-Spec, ``proposers/vocab_subset.py``)
restricts the LM head to the tokens that carry most text; ``set_vocab`` changes it.

With k = "auto" a step is plain whenever the measured rates say the tree does not pay
(``proposers/fallback.py``, the state's ``fallback``; ``chose_plain`` feeds ``Stats.auto_plain``).

The draft is deterministic (q = None): tokens are a function of the committed text only, so the
shared verifier keeps the target's distribution exactly at every temperature.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from specdec.core.proposer import Context
from specdec.core.seq import resync
from specdec.core.tree import Draft
from specdec.fast import lowp
from specdec.models import packed as P
from specdec.proposers import vocab_subset
from specdec.proposers.eagle.batch import BatchEagle
from specdec.proposers.eagle.decode import EagleDecoder, EagleReference
from specdec.proposers.eagle.growth import Growth
from specdec.proposers.eagle.layer import EagleLayer
from specdec.proposers.eagle.state import EagleState
from specdec.proposers.vocab_subset import SubsetHead


class Eagle:
    name = "eagle"

    def __init__(
        self,
        layer: EagleLayer,
        embed: torch.Tensor,
        lm_head: torch.Tensor | torch.nn.Linear,
        vocab: int | None = None,
        nodes: int = 24,
        depth: int = 6,
        beam: int = 2,
        top_k: int = 2,
        node_cost: float = 0.09,
        expand_min: float = 0.3,
        capacity: int = 1024,
    ) -> None:
        self.layer, self.embed = layer.eval(), embed
        # the same function in fewer ops, or the module's own: calibration picks (decode.py)
        self.decoders = {"fused": EagleDecoder(self.layer), "reference": EagleReference(self.layer)}
        self.decoder = self.decoders["fused"]
        # the target's own LM head (Target.head): its packed copy is shared, hot after the target's step
        if isinstance(lm_head, P.Linear):
            self._head = lm_head
        else:
            self._head = P.Linear.shared(lm_head) if isinstance(lm_head, torch.nn.Linear) else P.Linear(lm_head)
        self._own_head: P.Linear | None = None  # a lower-precision copy of it (set_precision)
        self.sub: SubsetHead | None = None  # the head on a reduced draft vocabulary (set_vocab)
        self.vocab = vocab
        self.nodes, self.depth, self.beam, self.top_k, self.node_cost = nodes, depth, beam, top_k, node_cost
        self.expand_min = expand_min
        # the solo request's state (its KV, the tokens it holds, auto k's fallback: state.py); a
        # batch row holds its own, and both draft through the batch form's one propose (batch.py)
        self.state = EagleState(self.decoder.new_kv(capacity))
        self.form = BatchEagle(self, 0, 0)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(self.decoders)

    def use(self, path: str) -> None:
        """Draft through decoder ``path`` ("fused" or "reference"); its cache starts empty."""
        if path not in self.decoders:
            raise ValueError(f"eagle path {path!r} not available: {', '.join(self.decoders)}")
        self.decoder = self.decoders[path]
        self.state.forget()

    @property
    def precisions(self) -> tuple[str, ...]:
        """The fused decoder's and the LM head's weight precisions here (``lowp.py``)."""
        return lowp.precisions(self._head.weight)

    def set_precision(self, precision: str, keep: bool = False) -> None:
        """The fused decoder's linears and EAGLE's reads of the LM head in ``precision``; the target's
        own head is never changed (EAGLE then reads a copy of it, in that precision)."""
        lowp.set_all(self.decoders["fused"], precision, keep)
        if precision == "fp32" and not keep:
            self._own_head = None
        elif precision != "fp32":
            self._own_head = self._own_head or P.Linear(self._head.weight, self._head.bias)
        if self._own_head is not None:
            lowp.set_precision(self._own_head, precision, keep)
        if self.sub is not None:
            lowp.set_precision(self.sub.linear, precision, keep)

    @property
    def vocab_ids(self) -> torch.Tensor | None:
        """The draft vocabulary in use (``set_vocab``), None: the whole vocabulary."""
        return None if self.sub is None else self.sub.ids

    def set_vocab(self, ids: torch.Tensor | None) -> None:
        """Draft from the token ids ``ids`` only (FR-Spec, ``proposers/vocab_subset.py``); None: all."""
        vocab = self.vocab or self._head.weight.shape[0]
        self.sub = None if ids is None else SubsetHead(self._head, ids, vocab)

    @classmethod
    def load(cls, folder: Path, target: torch.nn.Module, vocab: int | None = None, head=None, **kw) -> Eagle:
        """``head``: the target's LM head as the engine's ``Target.head`` hands it (shared packed
        copy); default: a wrapper of the target's own output embedding module."""
        module = target.get_output_embeddings()
        layer = EagleLayer.load(folder, module.weight.device, module.weight.dtype, target)
        eagle = cls(layer, target.get_input_embeddings().weight, head or module, vocab, **kw)
        eagle.set_vocab(vocab_subset.load(folder))
        return eagle

    def logp(self, feats: torch.Tensor) -> torch.Tensor:
        """Log-probabilities over the (shared) vocabulary of features ``feats`` through the LM head in
        the precision in use: what the solo tree and the batch's (``proposers/eagle/batch.py``) grow from.
        With a draft vocabulary (``set_vocab``): ``-inf`` outside it, normalised over it."""
        if self.sub is not None:
            return self.sub.logp(feats)
        head = self._own_head if self._own_head is not None and self._own_head.low is not None else self._head
        logits = head(feats)
        return torch.log_softmax((logits[..., : self.vocab] if self.vocab else logits).float(), -1)

    def pending(self, state: EagleState, tokens: list[int], hidden: torch.Tensor) -> tuple[int, torch.Tensor, ...]:
        """The pairs of ``tokens`` not yet in ``state``'s cache, from the first invalid one: (valid,
        f, e), f and e [m - valid, H] (m = len(tokens) - 1; never empty: the last pair is always
        refed for its output); the cache is cut to ``valid``. ``batch.py`` feeds many rows' at once."""
        m = len(tokens) - 1  # pairs j = 0..m-1: (f_j, x_{j+1}); the last is (f_t, pending)
        # pair j is valid while tokens[: j + 2] agree
        valid = max(0, resync(state.ids, state.kv.length + 1, tokens, m) - 1)
        state.kv.length = valid
        dev = self.embed.device
        f = hidden[valid:m].to(device=dev, dtype=self.embed.dtype)
        e = self.embed[torch.tensor(tokens[valid + 1 : m + 1], device=dev)]
        return valid, f, e

    def _sync(self, state: EagleState, tokens: list[int], hidden: torch.Tensor) -> torch.Tensor:
        """Cache the pairs of ``tokens``; return the predicted feature after the last one."""
        valid, f, e = self.pending(state, tokens, hidden)
        out = self.decoder.attend(f, e, torch.arange(valid, len(tokens) - 1, device=f.device), state.kv, None)
        state.ids = list(tokens)
        return out[-1]

    @property
    def chose_plain(self) -> bool:
        """Whether the solo request's last step was a plain one auto k chose (``Stats.auto_plain``)."""
        return self.state.chose_plain

    def propose(self, ctx: Context) -> Draft:
        """The solo request's draft: the batch of one (``BatchEagle.propose``, which runs ``tree``)."""
        return self.form.propose([self.state], [ctx])[0]

    @torch.inference_mode()
    def tree(self, ctx: Context, state: EagleState | None = None) -> Draft:
        """One request's tree on its own cache (``state``, by default the solo request's): the
        computation a batch of one runs; the batch's form grows many rows' trees together."""
        state = state or self.state
        budget = min(self.nodes, ctx.budget, ctx.k_max or self.nodes)
        if budget <= 0 or ctx.hidden is None or len(ctx.hidden) == 0:
            return Draft.empty()
        root = self._sync(state, ctx.tokens, ctx.hidden)
        m = state.kv.length
        try:
            tok, par, score = self._grow(state.kv, root, m)
        finally:
            state.kv.length = m  # drop the draft slots
        return self.cut(tok, par, score, budget)

    def _grow(self, kv, root: torch.Tensor, m: int):
        """Candidates as flat lists: token, parent candidate index (-1 = root), log value."""
        g = Growth(root, m)
        g.start(*self.logp(root).topk(self.top_k))
        for d in range(1, self.depth):
            if not g.next(self.beam, self.floor):
                break
            f, toks, pos, own = g.inputs(d)
            L, n, dev = kv.length, len(toks), self.embed.device
            e = self.embed[torch.tensor(toks, device=dev)]
            out = self.decoder.attend(f, e, torch.full((n,), pos, device=dev), kv, g.mask(own, L + n, dev))
            g.grown(out, *self.logp(out).topk(self.top_k, dim=-1))
        return g.tok, g.par, g.score

    @property
    def floor(self) -> float:
        """A frontier whose best value is below this is not expanded (module docstring, step 2)."""
        return max(self.node_cost, self.expand_min)

    def _best_size(self, values: list[float]) -> int:
        """The n maximising (1 + sum of the n best values) / (1 + node_cost n): draft confidence
        as the estimate of acceptance (EAGLE-2), node_cost the verifier's cost of one more node."""
        best_n, best, total = 1, -1.0, 1.0
        for n, v in enumerate(values, 1):
            total += v
            ratio = total / (1.0 + self.node_cost * n)
            if ratio > best:
                best_n, best = n, ratio
        return best_n

    def cut(self, tok, par, score, budget) -> Draft:
        """The draft a grown tree gives (candidates ``tok`` with parents ``par`` and log values
        ``score``): the most valuable nodes whose parents are in, at most ``budget``, cut to the size
        that pays for its nodes (``node_cost``); the solo and the batch's trees end here."""
        order = sorted(range(len(tok)), key=lambda c: -score[c])
        chosen: dict[int, int] = {}
        for c in order:  # a parent's value is >= its child's; ties: parents were created first
            if len(chosen) == budget:
                break
            if par[c] < 0 or par[c] in chosen:
                chosen[c] = 0
        depth = {}
        for c in sorted(chosen):
            depth[c] = 1 if par[c] < 0 else depth[par[c]] + 1
        picks = list(chosen)  # in value order
        if self.node_cost > 0.0:
            picks = picks[: self._best_size([math.exp(score[c]) for c in picks])]
        final = sorted(picks, key=lambda c: (depth[c], c))  # by depth, siblings by value (topk order)
        index = {c: i for i, c in enumerate(final)}
        parents = [index[par[c]] if par[c] >= 0 else -1 for c in final]
        return Draft(torch.tensor([tok[c] for c in final], dtype=torch.long), tuple(parents))
