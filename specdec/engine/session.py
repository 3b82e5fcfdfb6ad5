"""The speculative decoding loop: ``Engine.stream(prompt, spec) -> Iterator[StepEvent]``.

Contract (docs/architecture.md, invariants I1-I6):
1. propose  draft = proposer.propose(Context(tokens, params, budget, ...))
2. score    p rows = target.score(pending, draft): one forward over [pending] + draft
3. verify   verdict = verify(draft, to_probs(p rows), generator): the one exact verifier
4. commit   target.commit(verdict.path); tokens += accepted + [verdict.token]; EOS and the
            length limit cut the step short
5. emit     yield StepEvent(...): state is committed before the yield, so closing the generator
            at any point leaves the engine consistent.
Steps 3-5 are ``specdec.core.step.finish``, the same function every batch row calls
(``specdec/serving/batch/rows.py``); this module owns prefill, propose and the target's forward.
An empty draft is a plain decoding step, so the baseline (``none``) runs this same code, and
greedy decoding is temperature 0 through the same path. ``generate`` is a fold over ``stream``.

The engine builds one proposer per method of the registry (``specdec/core/methods.py``) whose needs it
loaded; a request's settings reach the proposer in its ``Context``, never by mutating it.
An Engine decodes one stream at a time: starting a stream supersedes any earlier one of the same
thread that is still open (resuming that one raises ``EngineBusy``), and starting one while another
thread's stream is running raises ``EngineBusy``, so no caller can corrupt the caches. Front ends
that serve several users go through a ``Backend`` (``specdec/serving/backend.py``), which owns the model
thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from specdec.core import healing
from specdec.core import methods as M
from specdec.core.config import ConfigError, GenerateSpec, check_ids
from specdec.core.detok import Detokenizer
from specdec.core.events import Stats, StepEvent
from specdec.core.proposer import Context, Proposer, plain_choice
from specdec.core.sampling import to_probs
from specdec.core.step import Run, finish, generator
from specdec.core.tree import Draft
from specdec.fast.calibrate import Calibration, calibrate
from specdec.models import prefixes
from specdec.models.loading import DEFAULT_DRAFT, DEFAULT_TARGET, load_models
from specdec.models.target import Target
from specdec.proposers import draft_warm


@dataclass(frozen=True)
class Result:
    tokens: list[int]
    text: str
    stats: Stats
    stop: str | None
    events: list[StepEvent]

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "text": self.text, "stats": self.stats.to_dict(), "stop": self.stop}


class EngineBusy(RuntimeError):
    """A stream was resumed after a newer stream of the same engine started, or a thread started
    a stream while another thread's stream was running."""


class Engine:
    """A tokenizer, a target and the proposers of every method it can offer, shared by the
    requests of a process (one stream at a time; see the module docstring)."""

    def __init__(
        self,
        tokenizer,
        target_model: torch.nn.Module,
        draft_model: torch.nn.Module | None = None,
        context: int | None = None,
        heads_dir: Path | str | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        vocab = len(tokenizer)
        self.target = Target(target_model, context, vocab=vocab)
        self.draft_model = draft_model
        heads = Path(heads_dir) if heads_dir is not None else None
        self.heads_dir = heads
        res = M.Resources(target_model, draft_model, heads, vocab, lm_head=self.target.head)
        self.proposers: dict[str, Proposer] = {}
        for name, method in M.METHODS.items():
            proposer = method.make(res)
            if proposer is not None:
                self.proposers[name] = proposer
        eos = target_model.generation_config.eos_token_id if target_model.generation_config else None
        eos = eos if eos is not None else tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        self._owner: object | None = None  # the newest stream
        self._live: tuple[int, object] | None = None  # (thread, stream) of the stream running now
        self._guard = threading.Lock()  # for the two fields above only, never held across a step
        self.target_ms: float | None = None  # the target step's running time, carried across requests
        self.source = None  # the catalogue choice it was loaded from (catalog/resolve.py ``Choice``), or None
        self.calibration = Calibration("off")  # stock paths until a caller asks (``calibrate``)
        self.weight_timings: dict | None = None  # the weight formats timed (specdec/fast/calibrate_weights.py)

    @property
    def forward(self):
        """What computes the target's forwards (``specdec/models/forward.py``: path, weights, rows)."""
        return self.target.forward

    @property
    def model(self):
        """The catalogue entry it runs (specdec/catalog/known.py), None for folders outside it."""
        return self.source.model if self.source is not None else None

    @property
    def model_name(self) -> str:
        return self.source.name if self.source is not None else "custom"

    def calibrate(self, mode: str = "auto") -> Calibration:
        """Choose this machine's fastest paths by measurement (specdec/fast/calibrate.py): "auto"
        (cached timings, or a fresh measurement written to the cache), "recalibrate" or "off".
        Process-wide effects, which is why construction never does this: torch's thread count,
        the packed-linear plan (one per process: the last engine calibrated sets it) and the
        cache file under ``~/.cache/specdec`` (``$SPECDEC_CACHE``)."""
        self.calibration = calibrate(self, mode)
        return self.calibration

    def set_weights(self, fmt: str) -> None:
        """Run the target on its weights in ``fmt`` (``quant.FORMATS``; ``Target.set_weights``)."""
        self.target.set_weights(fmt)
        self.target_ms = None

    @classmethod
    def load(
        cls,
        target_dir: Path | str = DEFAULT_TARGET,
        draft_dir: Path | str | None = DEFAULT_DRAFT,
        device: str = "cpu",
        dtype: str | torch.dtype | None = None,
        heads_dir: Path | str | None = None,
        heads: bool = True,
        calibration: str | None = None,
    ) -> Engine:
        """``heads_dir`` (default: the target's parent folder, i.e. next to the target) holds the
        optional ``medusa/`` and ``eagle/`` folders; ``heads=False`` loads none. ``calibration``:
        None (the default: nothing measured, stock paths) or a mode for ``calibrate``, run once
        the engine is built ("auto", "recalibrate", "off"; specdec/fast/calibrate.py)."""
        tok, target, draft = load_models(target_dir, draft_dir, device, dtype)
        root = (Path(heads_dir) if heads_dir is not None else Path(target_dir).parent) if heads else None
        engine = cls(tok, target, draft, heads_dir=root)
        if calibration is not None:
            engine.calibrate(calibration)
        return engine

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(self.proposers)

    @property
    def context(self) -> int:
        return self.target.context

    def encode(self, prompt: str | list[int]) -> list[int]:
        if isinstance(prompt, str):
            if not prompt:
                raise ConfigError("the prompt is empty")
            prompt = self.tokenizer.encode(prompt, add_special_tokens=False)
        return check_ids(prompt, self.context)

    def why_unavailable(self, method: str) -> str:
        """Why ``method`` is not offered on this engine, and what would make it so."""
        name, have = self.model_name, ", ".join(self.methods)
        if method == "draft":
            train = f"specdec train --model {name} draft"
            return f"no draft model is loaded for {name} (--draft DIR, or train one: {train}); available: {have}"
        if method in ("medusa", "eagle"):
            where = (
                f"{self.heads_dir}/{method}/"
                if self.heads_dir is not None
                else f"a {method}/ folder next to the target"
            )
            train = f"specdec train --model {name} {method}"
            return f"no {method} heads for {name} (looked for {where}; train them: {train}); available: {have}"
        return f"available: {have}"

    def proposer(self, method: str) -> Proposer:
        if method not in self.proposers:
            raise ConfigError(f"method {method!r} is not available: {self.why_unavailable(method)}")
        return self.proposers[method]

    def stream(self, prompt: str | list[int], spec: GenerateSpec, corpus=(), tenant=None) -> Iterator[StepEvent]:
        """The loop's events. ``corpus``: extra token sequences prompt lookup may copy from (an
        editor's other documents); other methods ignore it. ``tenant``: whose namespace of the
        suffix cache the request reads and feeds (None: the default one)."""
        ids = self.encode(prompt)
        proposer = self.proposer(spec.method)
        with self._guard:
            _check_thread(self)
            owner = self._owner = object()
        return _loop(self, owner, ids, spec, proposer, (tuple(corpus), tenant))

    def generate(self, prompt: str | list[int], spec: GenerateSpec) -> Result:
        events = list(self.stream(prompt, spec))
        tokens = [t for ev in events for t in ev.token_ids]
        text = "".join(ev.text for ev in events)
        last = events[-1] if events else None
        return Result(tokens, text, last.stats if last else Stats(), last.stop if last else None, events)


def _loop(
    engine: Engine, owner: object, ids: list[int], spec: GenerateSpec, proposer: Proposer, extra: tuple
) -> Iterator[StepEvent]:
    with engine._guard:  # claimed at the first step, so a stream that never started holds nothing
        _check_thread(engine)
        _check_owner(engine, owner)
        engine._live = (threading.get_ident(), owner)
    try:
        yield from _steps(engine, owner, ids, spec, proposer, extra)
    finally:
        with engine._guard:
            if engine._live is not None and engine._live[1] is owner:
                engine._live = None


def _steps(
    engine: Engine, owner: object, ids: list[int], spec: GenerateSpec, proposer: Proposer, extra: tuple
) -> Iterator[StepEvent]:
    target, sp = engine.target, spec.sampling
    corpus, tenant = extra
    k_max = M.k_max(spec.method, spec.k)
    t_start = time.perf_counter()
    trie = None
    if spec.heal:  # the first tokens spell spec.heal, drawn from p conditioned on it (specdec/core/healing.py)
        ids, trie = healing.fit(engine, ids, spec.heal)
    t_prefill = time.perf_counter()  # healing's first call indexes the vocabulary (1.1 s for Qwen's): not prefill
    prefixes.before_prefill(target, ids)  # another document's prefix may be kept warm (specdec/models/prefixes.py)
    target.prefill(ids)
    draft_warm.after_prefill(proposer, ids)  # the draft's cache follows the prompt too
    stats = Stats(prefill_s=time.perf_counter() - t_prefill)
    run = Run(spec, list(ids), Detokenizer(engine.tokenizer, ids), generator(spec), stats, t_start=t_start)
    target_ms = getattr(engine, "target_ms", None)  # earlier requests measured it
    if trie is not None:
        run.step = 1
        t0 = time.perf_counter()
        logits = target.score(run.tokens[-1], trie.draft)
        event = healing.finish(run, trie, logits, target.commit, engine.eos_ids, 1000 * (time.perf_counter() - t0))
        yield event
        if event.stop is not None:
            return
    while True:
        _check_owner(engine, owner)
        run.step += 1
        t0 = time.perf_counter()
        budget = min(spec.max_new_tokens - run.produced - 1, engine.context - len(run.tokens))
        draft, chose_plain = Draft.empty(), False
        if budget > 0:
            ctx = Context(run.tokens, spec, budget, k_max, run.gen, target.hidden, target_ms, corpus, tenant)
            draft = proposer.propose(ctx)
            chose_plain = draft.n == 0 and plain_choice(proposer)
        t1 = time.perf_counter()
        logits = target.score(run.tokens[-1], draft)
        p = to_probs(logits, sp.temperature, sp.top_k, sp.top_p)
        t2 = time.perf_counter()
        target_ms = 1000 * (t2 - t1) if target_ms is None else 0.8 * target_ms + 0.2 * 1000 * (t2 - t1)
        engine.target_ms = target_ms
        timings = {"propose": 1000 * (t1 - t0), "score": 1000 * (t2 - t1)}
        event, _ = finish(run, draft, logits, p, target.commit, engine.eos_ids, engine.context, timings, chose_plain)
        yield event
        if event.stop is not None:
            return


def _check_thread(engine: Engine) -> None:
    live = engine._live
    if live is not None and live[0] != threading.get_ident():
        raise EngineBusy(
            "another thread is decoding on this engine; an Engine is single-threaded "
            "(serve several requests through specdec.serving.local.LocalBackend)"
        )


def _check_owner(engine: Engine, owner: object) -> None:
    if engine._owner is not owner:
        raise EngineBusy(
            "a newer stream started on this engine; an Engine decodes one stream at a time "
            "(serve several requests through specdec.serving.local.LocalBackend)"
        )
