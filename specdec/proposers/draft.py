"""Draft-model speculation: a small causal LM samples k tokens and reports q for each.

Contract: ``propose`` resynchronises the draft's own KV cache with the committed tokens by
longest common prefix (continuing from the cache kept for that document when the prompt switched
to another one: the keep-warm policy the target's prefixes use, ``models/prefixes.KeptStates``),
feeds what is missing, then samples x_1..x_k autoregressively, each from
q_i = to_probs(draft logits, params) (the same transform the target's p goes through, I3). At
temperature 0 the draft is deterministic (argmax) and q is returned as None (one-hot), which the
verifier treats identically.

``k = "auto"`` adapts the draft length to the measured acceptance. The proposer infers how many of
its previous draft tokens were accepted from the tokens committed since (no feedback call), keeps
decayed counts of accepted tokens and of rejections, estimates the per-token acceptance rate
alpha = accepted / (accepted + rejections) (the maximum-likelihood estimate for a geometric run
length), measures the cost ratio c = draft forward time / target forward time, and picks the k in
[1, k_max] that maximises the expected speedup (1 - alpha^(k+1)) / ((1 - alpha)(k (c + v) + 1)),
v = ``verify_cost``, the extra cost of verifying one more token (a CPU's wider forward is not free,
a GPU's nearly is); without it a confident draft drafts longer than pays. When no k beats plain
decoding (speedup <= 1), auto k chooses k = 0, a plain step (``choose_k``; a probe drafts one
token after a run of such steps to keep measuring alpha, the run doubling while the probes find
that drafting does not pay: ``fallback.ProbeBackoff``), and sets ``chose_plain``, which the
engine counts in the step stats (``Stats.auto_plain``): speculation is then never slower than
plain decoding by more than the probes. ``plain_run`` counts one request's steps: a new request
(another token list) starts it at 0, while alpha and c carry over (they describe the models and the
machine). These live in one ``DraftState`` (``draft_k.py``), with the
tokens its KV holds; the proposer holds the solo request's (``state``) and a batch row its own.
``propose(ctx)`` is the batch of one: ``batch_draft.BatchDraft.propose([state], [ctx])`` through
the proposer's own form (no slots), which runs ``chain``, the draft's own lean or transformers'
forward on its own cache, exactly the single-request computation. The request's k
(``ctx.spec.k``) and the registry's cap for auto (``ctx.k_max``) travel with each call.

``ctx.spec.confidence`` ends the chain early at a position where the draft's own top probability
is below it: an unsure draft token is likely rejected and costs a draft forward plus a wider
verification. The decision uses q alone, so exactness is untouched. The measured effect of both
knobs is in docs/bench.md.
"""

from __future__ import annotations

import time

import torch

from specdec.core.proposer import Context
from specdec.core.sampling import sample, to_probs
from specdec.core.seq import resync
from specdec.core.tree import Draft
from specdec.fast import lowp
from specdec.models.lean import LeanLlama
from specdec.models.prefixes import KeptStates
from specdec.proposers.batch_draft import BatchDraft
from specdec.proposers.draft_k import FIRST_K, PROBE_EVERY, AcceptanceTracker, DraftState, choose_k
from specdec.proposers.draft_runner import HFRunner

__all__ = ["FIRST_K", "PROBE_EVERY", "AcceptanceTracker", "DraftModel", "DraftState", "HFRunner", "choose_k"]


class DraftModel:
    name = "draft"

    def __init__(
        self, model: torch.nn.Module, vocab: int | None = None, lean: bool = True, verify_cost: float | None = None
    ) -> None:
        self.model = model.eval()
        on_cpu = next(model.parameters()).device.type == "cpu"
        # the extra target cost of verifying one more token, relative to a decoding step: about 0.1
        # on a CPU, ~0 on a GPU, which verifies a few more tokens almost for free (docs/bench.md)
        self.verify_cost = verify_cost if verify_cost is not None else (0.1 if on_cpu else 0.0)
        capacity = min(int(getattr(model.config, "max_position_embeddings", 2048)), 1024)
        # both forwards where the lean one applies; calibration (specdec/fast/calibrate.py) picks one
        self.runners = {"hf": HFRunner(model, capacity)}
        if lean and LeanLlama.supports(model):
            self.runners["lean"] = LeanLlama(model, capacity)
        self.runner = self.runners["lean" if "lean" in self.runners else "hf"]
        self.capacity, self.float_runners, self.weights = capacity, self.runners, "fp32"
        self.kept = KeptStates()  # the caches of other documents' prompts (models/prefixes.py's policy)
        # the solo request's state (draft_k.py): its KV's tokens, acceptance, step time, run of plain
        # steps; a batch row holds its own, and both draft through the one BatchDraft.propose
        self.state = DraftState()
        self.live = self.state  # the state whose cache the runner holds (``chain``)
        self.vocab = vocab
        self.form = BatchDraft(self, 0, 0)  # no slots: every state through the runner, as solo

    # the solo state's fields, read (and step_ms set) by the engine's stats, the bench and tests
    @property
    def ids(self) -> list[int]:
        return self.state.ids

    @property
    def tracker(self) -> AcceptanceTracker:
        return self.state.tracker

    @property
    def step_ms(self) -> float | None:
        return self.state.step_ms

    @step_ms.setter
    def step_ms(self, ms: float | None) -> None:
        self.state.step_ms = ms

    @property
    def plain_run(self) -> int:
        return self.state.plain_run

    @property
    def chose_plain(self) -> bool:
        return self.state.chose_plain

    @property
    def lean(self) -> LeanLlama | None:
        """The lean float forward (its fused weights, in the precision calibration set), if it runs
        (None on 4-bit weights: ``draft_quant.QuantRunner`` has no batched form)."""
        lean = self.runners.get("lean")
        return lean if isinstance(lean, LeanLlama) else None

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(self.runners)

    @property
    def precisions(self) -> tuple[str, ...]:
        """The lean forward's weight precisions here (``lowp.py``); calibration picks one."""
        lean = self.runners.get("lean")
        return lowp.precisions(lean.embed) if isinstance(lean, LeanLlama) else ("fp32",)

    def set_precision(self, precision: str, keep: bool = False) -> None:
        """The lean forward's linears in ``precision`` from now on; q stays the distribution of the
        logits actually sampled from, so exactness is untouched."""
        if isinstance(self.runners.get("lean"), LeanLlama):
            lowp.set_all(self.runners["lean"], precision, keep)

    def set_weights(self, fmt: str) -> None:
        """The draft on its weights in ``fmt`` from now on: "fp32" (as loaded: transformers' and the
        lean forwards) or a 4-bit/8-bit format through the target's lean forward, then the only path
        (``draft_quant.py``). Its cache starts empty and its step time is measured again."""
        from specdec.proposers.draft_quant import QuantRunner

        if fmt == self.weights:
            return
        self.runners = self.float_runners if fmt == "fp32" else {"lean": QuantRunner(self.model, self.capacity, fmt)}
        self.weights = fmt
        self.use("lean" if "lean" in self.runners else "hf")
        self.step_ms = None

    @property
    def vocab_ids(self) -> torch.Tensor | None:
        """The reduced draft vocabulary in use (``set_vocab``), None: the whole vocabulary."""
        return getattr(self.runners.get("lean"), "vocab_ids", None)

    def set_vocab(self, ids: torch.Tensor | None) -> None:
        """Draft from the token ids ``ids`` only (FR-Spec, ``vocab_subset.py``): on 4-bit weights
        (``set_weights``), whose runner reads its LM head on those rows; q is zero elsewhere, so
        only acceptance can change. None: the whole vocabulary. A later ``set_weights`` drops it."""
        runner = self.runners.get("lean")
        if not hasattr(runner, "set_vocab"):
            raise ValueError("a reduced draft vocabulary needs the draft on 4-bit weights (set_weights)")
        runner.set_vocab(ids)
        self.step_ms = None  # a step costs less now: measure it again

    def use(self, path: str) -> None:
        """Draft through ``path`` ("lean" or "hf") from now on; its cache starts empty."""
        if path not in self.runners:
            raise ValueError(f"draft path {path!r} not available here: {', '.join(self.runners)}")
        self.runner = self.runners[path]
        self.runner.truncate(0)
        self.live.forget()  # other states' caches were the other runner's: ``_own`` starts them afresh
        self.kept.clear()  # states of the other path's cache

    def current_k(self, ctx: Context) -> int:
        """The request's fixed k, or with k = "auto" the best k up to ``ctx.k_max`` for the
        measured alpha and cost ratio (4 until both are measured): ``DraftState.current_k``."""
        return self.state.current_k(ctx, self.verify_cost)

    def _own(self, state: DraftState) -> None:
        """Make the runner's cache ``state``'s: the live state's is set aside in that state, and
        ``state``'s own (or a fresh one) restored. The solo request's state is always live unless a
        batch drafts rows through this runner (a draft the ragged forward does not take)."""
        if state is self.live:
            return
        self.live.cache = (self.runner, self.runner.state())
        kept = state.cache
        if kept is None or kept[0] is not self.runner:  # none yet, or the other path's
            self.runner.restore(self.runner.fresh())
            state.ids = []
        else:
            self.runner.restore(kept[1])
        state.cache, self.live = None, state

    def _logits(self, tokens: list[int]) -> torch.Tensor:
        logits = self.runner.forward(tokens).float()
        self.live.ids.extend(tokens)
        return logits[: self.vocab] if self.vocab else logits

    def _resync(self, tokens: list[int]) -> tuple[torch.Tensor, int]:
        """Bring the live state's cache to ``tokens``; return the logits after the last one and how
        many tokens had to be fed."""
        if self.live is self.state:
            self._switch(tokens)
        st = self.live
        keep = resync(st.ids, self.runner.length, tokens, len(tokens) - 1)  # 0 after an interrupted call
        self.runner.truncate(keep)
        st.ids = st.ids[:keep]
        return self._logits(tokens[keep:]), len(tokens) - keep

    def _switch(self, tokens: list[int]) -> None:
        """Continue from the kept cache of this prompt's document, if one is kept (``KeptStates``)."""
        live = self.runner.state()
        valid = self.runner.length == len(self.state.ids)
        ids, state = self.kept.choose(self.state.ids, live, valid, tokens, self.runner.fresh)
        if state is not live:
            self.runner.restore(state)
            self.state.ids = list(ids)

    def drop_prefix(self, ids: list[int]) -> int:
        """Drop the kept caches of a closed document (its last prompt ``ids``; optional hook)."""
        return self.kept.drop(ids)

    def behind(self, tokens: list[int]) -> int:
        """How many of ``tokens`` the draft's cache would have to be fed to reach them (longest
        common prefix, the last token always fed: it is the pending one)."""
        if not tokens:
            return 0
        self._own(self.state)
        return len(tokens) - resync(self.state.ids, self.runner.length, tokens, len(tokens) - 1)

    @torch.inference_mode()
    def catch_up(self, tokens: list[int]) -> int:
        """Bring the draft's cache to ``tokens`` now (the proposer interface's optional hook,
        ``core/proposer.py``; ``specdec/proposers/draft_warm.py`` calls it after the target's prefill), the
        same feeding ``propose`` does first; returns how many tokens were fed."""
        self._own(self.state)
        return self._resync(tokens)[1] if tokens else 0

    def propose(self, ctx: Context) -> Draft:
        """The solo request's draft: the batch of one (``BatchDraft.propose``, which runs ``chain``)."""
        return self.form.propose([self.state], [ctx])[0]

    def chain(self, state: DraftState, ctx: Context, k: int) -> Draft:
        """Up to ``k`` (> 0) tokens for ``state`` (whose ``begin`` gave k) through the draft's own
        forward and cache: the single-request computation, timed into ``state`` (called by the
        form's ``propose``, under its inference mode)."""
        self._own(state)
        confidence = ctx.spec.confidence
        t0 = time.perf_counter()
        logits, fed = self._resync(ctx.tokens)
        t1 = time.perf_counter()
        greedy = ctx.params.greedy
        xs: list[int] = []
        qs: list[torch.Tensor] = []
        steps = 0
        for i in range(k):
            if confidence and float(torch.softmax(logits, -1).max()) < confidence:
                break  # the draft is unsure: stop here (a choice made from q alone keeps exactness)
            q = to_probs(logits, ctx.params.temperature, ctx.params.top_k, ctx.params.top_p)
            x = sample(q, None if greedy else ctx.generator)
            xs.append(x)
            if not greedy:
                qs.append(q)
            if i + 1 < k:
                logits = self._logits([x])
                steps += 1
        # c is the cost of one draft token: a catch-up of many tokens (the first call of a
        # request feeds the prompt) is not a draft step, so it is left out of the timing
        start, forwards = (t0, steps + 1) if fed <= 2 else (t1, steps)
        if forwards:
            state.timed(1000.0 * (time.perf_counter() - start) / max(1, forwards))
        state.end(ctx, xs)
        if not xs:
            return Draft.empty()
        return Draft.chain(torch.tensor(xs, dtype=torch.long), None if greedy else torch.stack(qs))
