"""``specdec lsp --model auto`` (the default): the most capable installed model that completes a line
within the latency goal on the running machine, chosen by measurement and cached.

Why: whether a real model answers fast enough depends on the CPU (its vector units pick the 4-bit
kernel), its load and the thread count: SmolLM2's step went from ~50 ms to ~6-10 ms with the native
q4_1 path on one machine, so no constant default can be right everywhere. A short measurement can.

Contract:
- ``GOAL_MS`` (150): the p50 goal of one line completion (issue 38).
- ``candidates(models, installed)`` (pure): the installed catalogue names, most capable first: a
  code model with fill-in-the-middle tokens before one without, then more parameters; the shipped
  ``tiny`` is never a candidate, it is the fallback. Nothing is ever fetched.
- ``choose(names, p50, goal)`` (pure): the first name whose ``p50(name)`` (milliseconds, or None:
  it could not be measured) is <= ``goal``, else ``FALLBACK``; returns the name and every figure
  asked for, in order. ``p50`` is asked lazily, so a slower candidate after the chosen one never
  loads.
- The cache: one JSON file per candidate and machine in ``cache_dir()`` (``lsp-auto-<digest>``),
  keyed by ``fields``: the model (name, installed folder's config stamp), the CPU (model name,
  count, flags), torch's version, the requested threads, the server's method / token limit / stop
  and ``MEASURE``'s version. ``read`` returns the recorded figures only when every field matches;
  ``write`` stores the fields with the figures (p50, each sample, date, load average).
- ``measure(engine, options)``: the server's own path (``Completer`` over a ``LocalBackend``) on
  ``N_PROMPTS`` of the shipped code prompts (cut after a word, the document ending at the cursor):
  per prompt an untimed 1-token request a keystroke earlier (warms the target's cache, as in
  typing) and a second one (one step on that warm cache), then a timed line completion. Bounded:
  a step slower than ``goal`` stops it at once (p50 None), a first completion slower than four
  times the goal stops it after that one, and so does ``BUDGET_S`` of measuring.
- ``load(args, defaults, load_engine, say)``: the loader ``specdec lsp`` uses for ``auto``: walks
  the candidates (one cached as too slow is never loaded; any other is loaded, and measured unless
  cached), keeps the engine it chose, frees the rejected ones, and ``say``s one line naming the
  choice and each candidate's p50 (``meets``: within the goal). ``--recalibrate`` measures again.
  Loading a candidate the first time also calibrates it (specdec/engine/load.py), which costs more
  than measuring it; later starts load only the chosen model.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from specdec.catalog import known, store
from specdec.paths import DEFAULT_PROMPTS, KeyedCache

GOAL_MS = 150.0
FALLBACK = "tiny"
N_PROMPTS = 5
BUDGET_S = 20.0  # measuring one candidate never takes longer than this (plus one request)
MEASURE = 1  # bump when the measure changes: every cached figure is then taken again


def params(m: known.Model) -> float:
    """``"1.5B"`` -> 1.5e9, ``"135M"`` -> 1.35e8 (0 when unreadable)."""
    scale = {"K": 1e3, "M": 1e6, "B": 1e9}
    try:
        return float(m.params[:-1]) * scale[m.params[-1].upper()]
    except (ValueError, KeyError, IndexError):
        return 0.0


def candidates(models: Iterable[known.Model], installed: Callable[[known.Model], bool]) -> list[str]:
    ranked = sorted((m for m in models if m.name != FALLBACK and installed(m)), key=lambda m: (not m.fim, -params(m)))
    return [m.name for m in ranked]


def choose(
    names: list[str], p50: Callable[[str], float | None], goal: float = GOAL_MS
) -> tuple[str, dict[str, float | None]]:
    figures: dict[str, float | None] = {}
    for name in names:
        figures[name] = p50(name)
        if figures[name] is not None and figures[name] <= goal:
            return name, figures
    return FALLBACK, figures


# -- the cache ------------------------------------------------------------------------------------


def cpu() -> dict:
    """The CPU as /proc/cpuinfo names it (model, flags digest), else what ``platform`` says."""
    name, flags = platform.processor() or platform.machine(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not name.startswith("model:"):
                name = "model:" + value.strip()
            elif key.strip() == "flags" and not flags:
                flags = hashlib.sha256(value.strip().encode()).hexdigest()[:16]
    except OSError:
        pass
    return {"cpu": name, "cpus": os.cpu_count(), "flags": flags}


def fields(name: str, threads: int, options) -> dict:
    import torch

    config = store.hf_dir(known.get(name)) / "config.json"
    try:
        stamp = f"{config.stat().st_size}:{config.stat().st_mtime_ns}"
    except OSError:
        stamp = ""
    return {
        "model": name,
        "installed": stamp,
        **cpu(),
        "torch": torch.__version__,
        "threads": threads,
        "method": options.method,
        "max_new_tokens": options.max_new_tokens,
        "stop": options.stop,
        "measure": MEASURE,
    }


CACHE = KeyedCache("lsp-auto", "fields", "figures")
cache_path, read, write = CACHE.path, CACHE.read, CACHE.write


# -- measuring ------------------------------------------------------------------------------------


def prompts(n: int | None = None, path: Path = DEFAULT_PROMPTS) -> list[str]:
    """The first ``n`` (``N_PROMPTS``) shipped code prompts (each ends after a line's first word)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r["prompt"] for r in rows if "prompt" in r][: n or N_PROMPTS]


async def _measure(backend, options, docs: list[str], goal: float) -> dict:
    from dataclasses import replace

    from specdec.lsp.completer import Completer

    completer, samples, tokens, t0 = Completer(backend), [], [], time.perf_counter()
    never = lambda: False  # noqa: E731
    warm = replace(options, max_new_tokens=1)
    for doc in docs:
        await completer.run(completer.prepare(doc[:-1], "", [], warm), never)
        t1 = time.perf_counter()
        await completer.run(completer.prepare(doc[:-2], "", [], warm), never)  # one step on a warm cache
        step_ms = round(1000 * (time.perf_counter() - t1), 1)
        if step_ms > goal:  # one step alone misses the goal
            return {"p50_ms": None, "samples_ms": samples, "step_ms": step_ms, "why": f"one step {step_ms:.0f} ms"}
        t1 = time.perf_counter()
        out = await completer.run(completer.prepare(doc, "", [], options), never)
        samples.append(round(1000 * (time.perf_counter() - t1), 1))
        tokens.append(getattr(out.stats, "emitted", None))
        if time.perf_counter() - t0 > BUDGET_S or samples[0] > 4 * goal:  # bounded; far past the goal
            break
    return {"p50_ms": statistics.median(samples), "samples_ms": samples, "tokens": tokens}


def measure(engine, options, goal: float = GOAL_MS, docs: list[str] | None = None) -> dict:
    """The figures of a line completion on ``engine``, through a temporary ``LocalBackend``."""
    from specdec.serving.local import LocalBackend

    backend = LocalBackend(engine, name="specdec-auto")
    try:
        out = asyncio.run(_measure(backend, options, docs or prompts(), goal))
    finally:
        backend.shutdown(10)
    out["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out["load"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return out


# -- the loader -----------------------------------------------------------------------------------


def meets(figures: dict, goal: float = GOAL_MS) -> bool:
    return figures.get("p50_ms") is not None and figures["p50_ms"] <= goal


def _loaded(name: str, f: dict, cached: dict | None, engine_of: Callable, defaults, kept: dict) -> dict:
    """Load ``name`` into ``kept``; its cached figures, else measured ones (written to the cache)."""
    t0 = time.perf_counter()
    try:
        kept[name] = engine_of(name)
    except Exception as e:  # a broken install is one failed candidate, not a dead server
        return {"p50_ms": None, "why": f"load failed: {e}"}
    if cached is not None:
        return {**cached, "cached": True}
    load_s = round(time.perf_counter() - t0, 1)
    try:
        figures = {**measure(kept[name], defaults), "load_s": load_s}
    except Exception as e:
        return {"p50_ms": None, "why": f"measuring failed: {e}"}
    write(f, figures)
    return figures


def load(args, defaults, load_engine: Callable, say: Callable[[str], None]):
    """The engine ``auto`` picks (``load_engine(namespace)`` loads one model's engine)."""
    import copy

    kept: dict = {}
    recorded: dict[str, dict] = {}

    def engine_of(name: str):
        ns = copy.copy(args)
        ns.model = name
        return load_engine(ns)

    def p50(name: str) -> float | None:
        f = fields(name, args.threads, defaults)
        cached = None if getattr(args, "recalibrate", False) else read(f)
        if cached is not None and not meets(cached):  # known too slow here: never loaded
            recorded[name] = {**cached, "cached": True}
        else:
            recorded[name] = _loaded(name, f, cached, engine_of, defaults, kept)
        if not meets(recorded[name]) and kept.pop(name, None) is not None:
            gc.collect()  # free a rejected model before the next one loads
        return recorded[name]["p50_ms"]

    name, _ = choose(candidates(known.MODELS, store.installed), p50)
    engine = kept.pop(name) if name in kept else engine_of(name)
    say(summary(name, recorded))
    return engine


def summary(name: str, recorded: dict[str, dict]) -> str:
    def one(n: str, f: dict) -> str:
        p = f.get("p50_ms")
        notes = [f"load average {f['load'][0]:.1f}"] if f.get("load") else []
        notes += ["cached"] if f.get("cached") else []
        fig = f"p50 {p:.0f} ms" if p is not None else f.get("why", "not measured")
        return f"{n} {fig}" + (f" ({', '.join(notes)})" if notes else "")

    measured = "; ".join(one(n, f) for n, f in recorded.items()) or "no catalogue model installed"
    why = "the most capable" if name != FALLBACK else "none of the installed models is"
    return (
        f"specdec lsp: model auto -> {name}: {why} within p50 <= {GOAL_MS:.0f} ms for a line completion "
        f"here ({measured}); --model NAME picks another, --recalibrate measures again"
    )
