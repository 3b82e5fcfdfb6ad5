"""The timing half of calibration (``specdec/fast/calibrate.py`` decides; this only measures).

Contract: ``measure(engine, shapes, parts) -> dict`` returns the timings ``calibrate.decide``
reads, in microseconds per call, keyed as documented there. Each comparison alternates its paths
sample by sample and keeps the minimum of each (the least disturbed sample on a shared machine).
The target's forwards are timed first and the thread counts on the faster one (``threads_on``);
``recheck`` re-times that plain step for the cache's staleness test. It leaves the engine's caches
empty and the thread count as it found it; the whole measurement is budgeted to a fraction of a
second for the shipped models (``calibrate.Calibration.seconds``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from specdec.core.tree import Draft
from specdec.models import cache as kv
from specdec.models import packed as P

SAMPLES = 4


def best_of(fns: dict[str, Callable[[], object]], calls: int = 1, samples: int = SAMPLES) -> dict[str, float]:
    """Minimum microseconds per call of each function, sampled alternately."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(samples):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) * 1e6 / calls)
    return best


def _target_step(engine) -> Callable[[], object]:
    target = engine.target
    vocab = target.lm_head.weight.shape[0]
    ids = torch.randint(0, vocab, (17,), generator=torch.Generator().manual_seed(0)).tolist()
    target.prefill(ids)

    def step():
        target.score(ids[-1], Draft.empty())
        kv.truncate(target.cache, len(target.ids))

    return step


def _target_paths(target, step) -> dict[str, float]:
    """The plain step on each of the target's forwards (transformers' decoder, the lean one)."""
    before = target.path

    def on(path):
        def fn():
            target.use(path)
            step()

        return fn

    try:
        return best_of({p: on(p) for p in target.paths}, calls=2)
    finally:
        target.use(before)


def recheck(engine, path: str, threads: int) -> float:
    """The plain step now (us, best of a few) on ``path`` with ``threads``: compared against the
    cached figure, it tells a cache measured on a loaded machine (``calibrate.stale``)."""
    target, before, was = engine.target, torch.get_num_threads(), engine.target.path
    try:
        torch.set_num_threads(threads)
        target.use(path)
        return best_of({"t": _target_step(engine)}, calls=2, samples=3)["t"]
    finally:
        torch.set_num_threads(before)
        target.use(was)
        kv.truncate(target.cache, 0)
        target.ids = []


def thread_counts() -> list[int]:
    n, out = max(1, os.cpu_count() or 1), [1]
    while out[-1] * 2 <= n:
        out.append(out[-1] * 2)
    return out + ([n] if out[-1] != n else [])


def _threads(engine, step) -> dict[str, float]:
    before, out = torch.get_num_threads(), {}
    try:
        for n in thread_counts():
            torch.set_num_threads(n)
            out[str(n)] = best_of({"t": step}, calls=2)["t"]
    finally:
        torch.set_num_threads(before)
    return out


def _linears(shapes) -> dict:
    g = torch.Generator().manual_seed(0)
    out = {}
    for o, i in sorted(shapes):
        w = torch.randn(o, i, generator=g)
        pw = P.pack_weight(w)
        rows = {}
        for r in P.PROBE_ROWS:
            x = torch.randn(r, i, generator=g)
            stock = lambda x=x, w=w: F.linear(x, w)
            rows[str(r)] = best_of({"stock": stock, "packed": lambda x=x, pw=pw: P.linear(x, pw)})
        out[f"{o}x{i}"] = rows
    return out


def _draft(prop) -> dict[str, float]:
    prompt = list(range(3, 3 + 12))

    def run(runner):
        def fn():
            runner.truncate(len(prompt))
            for t in range(3):
                runner.forward([20 + t])

        return fn

    fns = {}
    for name, runner in prop.runners.items():
        runner.truncate(0)
        runner.forward(prompt)
        fns[name] = run(runner)
    out = {k: v / 3 for k, v in best_of(fns, samples=3).items()}
    for runner in prop.runners.values():
        runner.truncate(0)
    prop.state.forget()
    return out


def _eagle(prop) -> dict[str, float]:
    hidden = prop.embed.shape[1]
    g = torch.Generator().manual_seed(0)
    f, e = torch.randn(12, hidden, generator=g), torch.randn(12, hidden, generator=g)
    beam = max(1, prop.beam)
    mask = torch.ones(beam, 12 + beam, dtype=torch.bool)

    def run(dec, cache):
        def fn():
            cache.length = 11
            dec.attend(f[11:], e[11:], torch.tensor([11]), cache, None)
            dec.attend(f[:beam], e[:beam], torch.full((beam,), 12), cache, mask)

        return fn

    fns = {}
    for name, dec in prop.decoders.items():
        cache = dec.new_kv(64)
        dec.attend(f[:11], e[:11], torch.arange(11), cache, None)
        fns[name] = run(dec, cache)
    out = best_of(fns, samples=3)
    prop.state.forget()
    return out


@torch.inference_mode()
def measure(engine, shapes, parts: dict) -> dict:
    target, before, was = engine.target, torch.get_num_threads(), engine.target.path
    step = _target_step(engine)
    out: dict = {"load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
    try:
        if len(target.paths) > 1:  # the threads are timed on the faster forward
            out["target"] = _target_paths(target, step)
            target.use(min(out["target"], key=out["target"].get))
        out["threads_on"] = target.path
        out["threads"] = _threads(engine, step)
        best = min(out["threads"], key=lambda n: out["threads"][n])
        torch.set_num_threads(int(best))
        out["linear"] = _linears(shapes) if P.available(target.lm_head.weight) else {}
        if "draft" in parts:
            out["draft"] = _draft(parts["draft"])
        if "eagle" in parts:
            out["eagle"] = _eagle(parts["eagle"])
    finally:
        torch.set_num_threads(before)
        target.use(was)
        kv.truncate(target.cache, 0)
        target.ids = []
    return out
