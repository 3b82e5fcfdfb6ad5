"""The target's weight format, chosen by measurement on the running machine (``models/quant.py``).

Why: a plain decoding step reads every weight once, so the format that moves fewest bytes should
win, but only if this CPU's kernel for it is fast: torch's int4 kernel has a fast path on some
CPUs and a slow generic one elsewhere, int8's weight-only kernel can be slower than float32.
So the formats are timed here, on the engine's own target, and the choice is cached per CPU,
torch version and model like the rest of calibration (``calibrate.py``). Only formats whose
forward is row-exact (``lean_target.ROW_EXACT``, checked with ``quant.row_invariant`` on this
machine) compete with float32: a format that could make the verifier's k-row forward round
differently from the plain step would break exactness against plain decoding.

Contract:
- ``candidates(engine)``: "fp32" and the row-exact formats available for the target here; where
  the integer block format "q4_1" is one of them, torch's float kernels ("int4", "int8") are not:
  their verify cost grows like k plain steps (a float multiply-add per weight per row), so they
  could only win a plain step and lose every speculative one, and timing them would hold more
  copies of the weights at once (the 1.5B coder held 16.5 GB calibrating four formats).
- ``measure(engine, formats) -> {fmt: {"step_us", "verify_us": {k: us}, "bytes"}}``: the plain
  step (one row), the verifier's forward of k + 1 rows (k in ``VERIFY_K``) and the weight bytes a
  step reads, each the minimum of a few samples; the engine is left on the format it had. Where
  the format has faster forwards than the eager one (``models/native.py``, ``models/scripted.py``)
  the default (native, else TorchScript) is timed as ``step_us`` and the others as
  ``script_step_us`` and ``eager_step_us``; ``use_forward(engine, timings)`` keeps the fastest.
- ``decide(timings, margin, alpha) -> str``: the format with the lowest cost per emitted token,
  ``token_us``: the cheaper of a plain step and a verification of ``VERIFY_K[0]`` draft tokens
  spread over the tokens such a step emits at acceptance ``alpha`` ((1 - alpha^(k+1)) / (1 - alpha);
  ``PRIOR_ALPHA``, the draft's prior before anything is measured). Why not the plain step alone:
  every speculative step pays the verify forward, and formats differ far more there (on the
  Qwen2.5-Coder 1.5B, int4's plain step was 16% faster than q4_1's but its 5-row verify cost 3.5
  plain steps against 1.4: the draft lost to plain decoding on int4 and gained on q4_1). With
  ``alpha`` 0 the rule is the fastest plain step. fp32 unless the choice beats it by ``margin``.
- ``choose(engine, mode)``: "auto" (cached, else measured), "recalibrate", or a format name
  (taken as given); sets it on the engine (and the timings as ``engine.weight_timings``, which
  ``specdec bench`` reports) and returns ``(format, timings or None)``.
"""

from __future__ import annotations

import hashlib
import json
import os

import torch

from specdec.core.tree import Draft
from specdec.fast.calibrate import MARGIN, cpu_name
from specdec.fast.calibrate_time import best_of
from specdec.models import cache as kv
from specdec.models import quant as Q
from specdec.models.lean_target import ROW_EXACT
from specdec.models.native import kernels_key
from specdec.paths import cache_dir

VERIFY_K = (4, 8)
TORCH_FLOAT = ("int4", "int8")  # torch's kernels: bfloat16 multiply-adds per weight and row
PRIOR_ALPHA = 0.6  # acceptance assumed by the choice: the draft's prior (proposers/draft_k.AcceptanceTracker)


def candidates(engine) -> list[str]:
    out = ["fp32"]
    target = engine.target
    for fmt in target.weight_formats():
        if fmt in ROW_EXACT:
            w = target.decoder.layers[0].mlp.down_proj.weight
            if Q.row_invariant(Q.quantize(w, fmt)):
                out.append(fmt)
    return [f for f in out if f not in TORCH_FLOAT] if "q4_1" in out else out


def step_bytes(target) -> int:
    """The weight bytes one plain step reads: every layer's linears and the LM head."""
    if target.weights == "fp32":
        lin = [m for m in target.model.modules() if isinstance(m, torch.nn.Linear)]
        return sum(m.weight.numel() * m.weight.element_size() for m in lin)
    lean = target.lean
    head = target.head.low
    return sum(q.nbytes for layer in lean.layers for q in layer.linears()) + head.nbytes


def _timed(target) -> dict:
    vocab = target.lm_head.weight.shape[0]
    ids = torch.randint(0, vocab, (65,), generator=torch.Generator().manual_seed(0)).tolist()
    target.prefill(ids)

    def run(draft: Draft):
        def fn():
            target.score(ids[-1], draft)
            kv.truncate(target.cache, len(target.ids))

        return fn

    fns = {"1": run(Draft.empty())} | {str(k): run(Draft.chain(ids[:k])) for k in VERIFY_K}
    for name in _others(target):  # the same step on the other row-exact forwards
        fns[name] = _with(target, name, fns["1"])
    t = best_of(fns, calls=2, samples=3)
    target.reset()
    out = {"step_us": t["1"], "verify_us": {k: t[str(k)] for k in map(str, VERIFY_K)}, "bytes": step_bytes(target)}
    return out | {f"{name}_step_us": t[name] for name in _others(target)}


def _others(target) -> tuple[str, ...]:
    """The row-exact forwards built besides the default one (native, else TorchScript; ``Target.rows``)."""
    rows = target.rows()
    return rows[1:] if len(rows) > 1 else ()


def _with(target, rows: str, fn):
    def run():
        before = target.forward.rows
        target.use_rows(rows)
        try:
            fn()
        finally:
            target.use_rows(before)

    return run


def use_forward(engine, timings: dict | None) -> str:
    """Keep the forward whose plain step timed fastest (``models/native.py``, ``models/scripted.py``
    or eager) through ``Target.use_rows``; returns its name ("native", "script", "eager" or "" off
    a row-exact format). Native is the default's choice wherever it exists; the others are bit for
    bit equal to each other, and the native one is used for every row-exact forward or for none,
    so this is a choice of speed."""
    target = engine.target
    rows = target.rows()
    if not rows:
        return ""
    t = (timings or {}).get(target.weights, {})
    times = {rows[0]: t.get("step_us", 0.0)} | {n: t[f"{n}_step_us"] for n in rows[1:] if f"{n}_step_us" in t}
    best = min(times, key=times.get)
    target.use_rows(best)
    return best


def measure(engine, formats: list[str]) -> dict:
    before, out = engine.target.weights, {}
    try:
        for fmt in formats:
            engine.set_weights(fmt)
            out[fmt] = _timed(engine.target)
    finally:
        engine.set_weights(before)
    return out


def token_us(t: dict, alpha: float = PRIOR_ALPHA) -> float:
    """One format's cost per emitted token: a plain step, or a k-token verify at acceptance alpha."""
    k = VERIFY_K[0]
    verify = t.get("verify_us", {}).get(str(k))
    if verify is None:
        return t["step_us"]
    tokens = k + 1 if alpha >= 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
    return min(t["step_us"], verify / tokens)


def decide(timings: dict, margin: float = MARGIN, alpha: float = PRIOR_ALPHA) -> str:
    cost = {f: token_us(t, alpha) for f, t in timings.items()}
    best = min(cost, key=lambda f: (cost[f], timings[f]["step_us"]))
    return best if cost[best] < cost.get("fp32", float("inf")) * (1 - margin) else "fp32"


def _cache_file(engine):
    fields = [cpu_name(), os.cpu_count(), torch.__version__, engine.model_name, torch.get_num_threads(), kernels_key()]
    key = "|".join(str(f) for f in fields)
    return cache_dir() / f"weights-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def choose(engine, mode: str = "auto") -> tuple[str, dict | None]:
    if mode in Q.FORMATS:
        engine.set_weights(mode)
        return mode, None
    if mode not in ("auto", "recalibrate"):
        raise ValueError(f"--weights must be auto, recalibrate or one of {', '.join(Q.FORMATS)}, got {mode!r}")
    formats = candidates(engine)
    if formats == ["fp32"]:
        return "fp32", None
    path, timings = _cache_file(engine), None
    if mode == "auto" and path.exists():
        try:
            timings = json.loads(path.read_text())
            timings = timings if set(timings) == set(formats) else None
        except (OSError, ValueError):
            timings = None
    if timings is None:
        timings = measure(engine, formats)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(timings, indent=1))
        except OSError:
            pass
    fmt = decide(timings)
    engine.set_weights(fmt)
    engine.weight_timings = timings
    use_forward(engine, timings)
    return fmt, timings
