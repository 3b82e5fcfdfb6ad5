"""``specdec lsp --model auto`` (the default): the most capable installed model that fits in memory
and completes a line within the latency goal here, decided once and cached.

Why: whether a real model answers fast enough depends on the CPU, its load and the thread count, so
no constant default is right everywhere; a short measurement is. But measuring means loading, and
loading the wrong candidate once ran a 2-core host out of memory (issue 53): so what can be known
without loading (installed models, their weights' sizes, the free memory, an earlier decision)
decides first, and at most one candidate is ever loaded at a time.

Contract:
- ``Candidate`` (name, fim, params, resident bytes estimated by ``specdec.lsp.fit``);
  ``ranked(cands)`` (pure): most capable first: a code model with fill-in-the-middle tokens before
  one without, then more parameters. The shipped ``tiny`` (``FALLBACK``) is never a candidate.
  ``installed()``: the installed catalogue models as candidates. Nothing is ever fetched.
- ``fitting(cands, allowed)`` (pure): (the candidates whose estimate is <= ``allowed`` bytes,
  a reason for each refused one).
- ``choose(names, figures, goal)`` (pure): the first name whose ``figures(name)`` meets the goal;
  else, of those that loaded and were measured, the fastest (a real model that fits is never
  passed over for ``tiny``); else ``FALLBACK``. ``figures`` is asked lazily, in order, so nothing
  after the chosen one loads. Returns the name and every figure asked for.
- The caches (``cache_dir()``): per candidate, ``lsp-auto-<digest>`` keyed by ``fields`` (model and
  its installed stamp, CPU, torch, threads, the server's method / token limit / stop, ``MEASURE``)
  holds its figures, or its failure: a record "loading began" is written before each load and
  replaced after, so a load the kernel kills is remembered as failed. ``DECISION``
  (``lsp-auto-decision-<digest>``, keyed by every installed candidate's stamp, the CPU, the
  settings and the memory cap) holds the last choice, so a later start loads it at once.
- ``load(args, defaults, load_engine, say)``: the loader ``specdec lsp`` uses for ``auto``;
  ``say``s every step (one line each) and returns the engine. ``--recalibrate`` decides again.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import os
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from specdec.catalog import known, store
from specdec.lsp import fit
from specdec.lsp.measure import GOAL_MS, measure, meets
from specdec.paths import KeyedCache

FALLBACK = "tiny"
MEASURE = 2  # bump when the measure changes: every cached figure is then taken again


@dataclass(frozen=True)
class Candidate:
    name: str
    fim: bool
    params: float
    resident: int  # estimated peak resident bytes (specdec.lsp.fit)


def params(m: known.Model) -> float:
    """``"1.5B"`` -> 1.5e9, ``"135M"`` -> 1.35e8 (0 when unreadable)."""
    scale = {"K": 1e3, "M": 1e6, "B": 1e9}
    try:
        return float(m.params[:-1]) * scale[m.params[-1].upper()]
    except (ValueError, KeyError, IndexError):
        return 0.0


def ranked(cands: Iterable[Candidate]) -> list[Candidate]:
    return sorted((c for c in cands if c.name != FALLBACK), key=lambda c: (not c.fim, -c.params))


def fitting(cands: list[Candidate], allowed: int) -> tuple[list[Candidate], dict[str, str]]:
    fits = [c for c in cands if c.resident <= allowed]
    refused = {c.name: f"needs ~{fit.gb(c.resident)}, allowed {fit.gb(allowed)}" for c in cands if c not in fits}
    return fits, refused


def failed(f: dict | None) -> bool:
    """Not loaded, or loaded and never measured (its load or its measuring failed)."""
    return not f or (f.get("p50_ms") is None and f.get("step_ms") is None)


def choose(
    names: list[str], figures: Callable[[str], dict | None], goal: float = GOAL_MS
) -> tuple[str, dict[str, dict | None]]:
    seen: dict[str, dict | None] = {}
    for name in names:
        seen[name] = figures(name)
        if meets(seen[name], goal):
            return name, seen
    usable = [n for n, f in seen.items() if not failed(f)]
    if not usable:
        return FALLBACK, seen
    # measured p50 first (a line), then the one warm step of those stopped early; ties: the order given
    return min(usable, key=lambda n: (seen[n]["p50_ms"] is None, seen[n]["p50_ms"] or seen[n]["step_ms"])), seen


def installed(models: Iterable[known.Model] = known.MODELS) -> list[Candidate]:
    from specdec.catalog.resolve import resolve

    out = []
    for m in models:
        if m.name == FALLBACK or not store.installed(m):
            continue
        try:
            choice = resolve(m.name, None, None, False)
        except Exception:  # noqa: BLE001 - its draft is missing: loading it would fail the same way
            continue
        n = fit.elements(choice.target) + fit.elements(choice.draft)
        out.append(Candidate(m.name, m.fim, params(m), fit.resident(n)))
    return ranked(out)


# -- the caches -----------------------------------------------------------------------------------


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


def stamp(name: str) -> str:
    config = store.hf_dir(known.get(name)) / "config.json"
    try:
        return f"{config.stat().st_size}:{config.stat().st_mtime_ns}"
    except OSError:
        return ""


def settings(threads: int, options) -> dict:
    import torch

    return {
        **cpu(),
        "torch": torch.__version__,
        "threads": threads,
        "method": options.method,
        "max_new_tokens": options.max_new_tokens,
        "stop": options.stop,
        "measure": MEASURE,
    }


def fields(name: str, threads: int, options) -> dict:
    return {"model": name, "installed": stamp(name), **settings(threads, options)}


def decision_key(names: list[str], threads: int, options, cap: int) -> dict:
    return {"installed": {n: stamp(n) for n in sorted(names)}, "cap": cap, **settings(threads, options)}


CACHE = KeyedCache("lsp-auto", "fields", "figures")
cache_path, read, write = CACHE.path, CACHE.read, CACHE.write
DECISION = KeyedCache("lsp-auto-decision", "key", "decision")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# -- the loader -----------------------------------------------------------------------------------


class _Walk:
    """One start's walk over the candidates: loads at most one at a time, frees the rejected ones."""

    def __init__(self, args, defaults, load_engine: Callable, say: Callable[[str], None], cap: int) -> None:
        self.args, self.defaults, self.load_engine, self.say, self.cap = args, defaults, load_engine, say, cap
        self.kept: dict = {}  # at most one engine: the last one measured, freed before another loads
        self.short = False  # a candidate was passed over for the memory free now (not cached as a decision)

    def engine_of(self, name: str):
        ns = copy.copy(self.args)
        ns.model = name
        return self.load_engine(ns)

    def figures(self, cand: Candidate) -> dict | None:
        f = fields(cand.name, self.args.threads, self.defaults)
        cached = None if getattr(self.args, "recalibrate", False) else read(f)
        if cached is not None:
            self.say(f"specdec lsp: auto: {cand.name}: {describe(cached)} (cached {cached.get('date', '')})")
            return {**cached, "cached": True}
        self.free()  # the one measured before goes first: one candidate in memory at a time
        allowed = fit.allowed(fit.available(), self.cap)  # the memory free now, not at start
        if cand.resident > allowed:
            self.short = True
            need = fit.gb(cand.resident)
            self.say(f"specdec lsp: auto: {cand.name}: not loaded: needs ~{need}, allowed now {fit.gb(allowed)}")
            return None
        self.say(f"specdec lsp: auto: {cand.name}: loading to measure it (needs ~{fit.gb(cand.resident)})")
        write(f, {"p50_ms": None, "why": f"loading began {now()} and never ended (killed?)", "date": now()})
        t0 = time.perf_counter()
        try:
            self.kept = {cand.name: self.engine_of(cand.name)}
            load_s = round(time.perf_counter() - t0, 1)
            self.say(f"specdec lsp: auto: {cand.name}: loaded in {load_s} s; measuring")
            got = {**measure(self.kept[cand.name], self.defaults), "load_s": load_s}
        except Exception as e:  # a broken install or a failed measure is one failed candidate, not a dead server
            got = {"p50_ms": None, "why": f"failed: {type(e).__name__}: {e}", "date": now()}
        write(f, got)
        self.say(f"specdec lsp: auto: {cand.name}: {describe(got)}")
        return got

    def free(self) -> None:
        if self.kept:
            self.kept.clear()
            gc.collect()

    def engine(self, name: str):
        if name in self.kept:  # the last one measured: kept
            return self.kept.pop(name)
        self.free()
        self.say(f"specdec lsp: auto: loading {name}")
        return self.engine_of(name)


def describe(f: dict) -> str:
    if f.get("p50_ms") is not None:
        extra = f" (load average {f['load'][0]:.1f})" if f.get("load") else ""
        return f"p50 {f['p50_ms']:.0f} ms{extra}" + (" - meets the goal" if meets(f) else " - slower than the goal")
    return f.get("why") or "not measured"


def load(args, defaults, load_engine: Callable, say: Callable[[str], None]):
    """The engine ``auto`` picks (``load_engine(namespace)`` loads one model's engine)."""
    cap = int(getattr(args, "auto_memory", None) or fit.CAP_BYTES)
    avail = fit.available()
    allowed = fit.allowed(avail, cap)
    cands = installed()
    say(
        f"specdec lsp: auto: installed {', '.join(c.name for c in cands) or 'no catalogue model'}; memory available "
        f"{fit.gb(avail) if avail is not None else 'unknown'}, a model may take {fit.gb(allowed)} (cap {fit.gb(cap)})"
    )
    walk = _Walk(args, defaults, load_engine, say, cap)
    key = decision_key([c.name for c in cands], args.threads, defaults, cap)
    cached = None if getattr(args, "recalibrate", False) else DECISION.read(key)
    by_name = {c.name: c for c in cands}
    if cached is not None and (cached["model"] == FALLBACK or by_name[cached["model"]].resident <= allowed):
        say(f"specdec lsp: auto -> {cached['model']} (decided {cached['date']}; --recalibrate decides again)")
        try:
            return walk.engine(cached["model"])
        except Exception as e:  # noqa: BLE001 - decide again without it
            say(f"specdec lsp: auto: {cached['model']} failed to load ({type(e).__name__}: {e}); deciding again")
            failure = {"p50_ms": None, "why": f"failed: {type(e).__name__}: {e}", "date": now()}
            write(fields(cached["model"], args.threads, defaults), failure)
    fits, refused = fitting(cands, allowed)
    for name, why in refused.items():
        say(f"specdec lsp: auto: {name}: not loaded: {why}")
    name, seen = choose([c.name for c in fits], lambda n: walk.figures(by_name[n]))
    why = "meets" if meets(seen.get(name)) else "the fastest measured; none meets" if name != FALLBACK else "none fits"
    say(f"specdec lsp: auto -> {name} ({why} the goal p50 <= {GOAL_MS:.0f} ms here; --model NAME picks another)")
    if not walk.short and not any(by_name[n].resident <= cap for n in refused):  # not for a transient shortage
        DECISION.write(key, {"model": name, "date": now(), "why": why})
    return walk.engine(name)
