"""Calibration at load: every speed path of the engine chosen by timing it on the running machine.

Why: which path is fastest (oneDNN packed linears or stock ``F.linear``, per weight shape and row
count; the lean draft forward or transformers'; EAGLE's fused decoder or the trained module's own
ops; how many threads) differs between CPUs of the same kind (docs/bench.md has the figures), so
no constant can choose. A short measurement at load does, and its result is cached.

Contract:
- ``calibrate_time.measure(engine, shapes, parts) -> dict``: the timings (microseconds per call), JSON-ready:
  ``{"target": {"hf": us, "lean": us}, "threads": {n: us}, "threads_on": path, "load": loadavg,
  "linear": {"OxI": {rows: {"stock": us, "packed": us}}},
  "draft": {"lean": us, "hf": us}, "eagle": {"fused": us, "reference": us}}`` (keys absent where a
  part is not loaded or has one path only); ``calibrate_lowp.measure`` adds ``"precision": {part:
  {precision: us}}``, each proposer's decoding work right after a target step, once the paths above
  are installed.
- ``decide(timings, margin) -> dict``: the choices, a pure function of the timings (tests inject
  them): ``threads`` (fewest within ``margin`` of the fastest), ``linear`` ``{"OxI": [packed? per
  row bucket]}`` (packed only where it beats stock by more than ``margin``), ``target``, ``draft``
  and ``eagle`` (the faster path, ties to the simpler one: transformers' forward, the trained module),
  ``precision`` ``{part: precision}`` (float32 unless another wins by more than ``margin``; among
  those within ``margin`` of the fastest, the most precise).
  Fewest threads within the margin, because under contention one thread degrades far less than
  two (OpenMP threads wait on a busy core; docs/bench.md has the figures).
- ``apply(engine, choices)`` installs them (``packed.set_plan``, ``torch.set_num_threads``, the
  target's and proposers' ``use``); ``calibrate(engine, mode)`` is measure + decide + apply with the
  cache: mode ``"auto"`` reads the cache (or measures and writes it; a cache whose plain step
  differs clearly from a quick re-measurement now, either way, was taken on a machine in another
  state and is measured again: ``stale``), ``"recalibrate"`` measures and rewrites it, ``"off"`` installs nothing (stock
  everywhere). Returns a ``Calibration``.
- The cache: one JSON file per key in ``cache_dir()`` (``$SPECDEC_CACHE``, else
  ``$XDG_CACHE_HOME/specdec``, else ``~/.cache/specdec``); the key hashes the CPU model and count,
  the torch version and the engine's shapes (``key_fields``), so a torch upgrade or other models
  miss it. An unreadable or mismatched file is measured again, never trusted.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specdec.fast import calibrate_lowp as CL
from specdec.fast import lowp as LOWP
from specdec.models import packed as P
from specdec.models.native import kernels_key
from specdec.paths import KeyedCache

MARGIN = 0.05  # a path must win by more than this fraction to replace the simpler one
PATHS = {"target": ("hf", "lean"), "draft": ("hf", "lean"), "eagle": ("reference", "fused")}  # (simpler, other)
STALE = 0.15  # a cache whose plain step differs this much from a re-measurement now is measured again


def stale(cached_us: float | None, now_us: float, tolerance: float = STALE) -> bool:
    """Whether cached timings were taken on a machine in another state than this one is now: the
    plain step re-measured now differs from the cached figure by more than ``tolerance`` of it,
    faster (the cache was taken under load) or slower (the machine is busier or slower now, and
    its choices, threads above all, may differ: they are measured again and the cache rewritten)."""
    return cached_us is not None and abs(now_us - cached_us) > cached_us * tolerance


def shape_key(shape) -> str:
    return f"{shape[0]}x{shape[1]}"


def decide(timings: dict, margin: float = MARGIN) -> dict:
    out: dict = {}
    threads = {int(n): t for n, t in timings.get("threads", {}).items()}
    if threads:
        best = min(threads.values())
        out["threads"] = min(n for n, t in threads.items() if t <= best * (1 + margin))
    out["linear"] = {
        key: [rows[str(r)]["packed"] < rows[str(r)]["stock"] * (1 - margin) for r in P.PROBE_ROWS]
        for key, rows in timings.get("linear", {}).items()
    }
    for part, (simple, other) in PATHS.items():
        t = timings.get(part, {})
        if simple in t and other in t:
            out[part] = other if t[other] < t[simple] * (1 - margin) else simple
        elif t:
            out[part] = next(iter(t))
    if timings.get("precision"):
        out["precision"] = {part: _precision(t, margin) for part, t in timings["precision"].items()}
    return out


def _precision(t: dict, margin: float) -> str:
    """float32 unless another precision beats it by more than ``margin``; then the most precise of
    those within ``margin`` of the fastest (``lowp.PRECISIONS`` is ordered most precise first)."""
    best = min(t.values())
    if "fp32" in t and best >= t["fp32"] * (1 - margin):
        return "fp32"
    return next(p for p in LOWP.PRECISIONS if p in t and t[p] <= best * (1 + margin))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def key_fields(engine) -> dict:
    target = engine.target.model
    return {
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "device": str(engine.target.device),
        "dtype": str(next(target.parameters()).dtype),
        "weights": engine.target.weights,
        "shapes": sorted(shape_key(s) for s in _shapes(engine)),
        "parts": sorted(_parts(engine)),
        "precision_parts": sorted(CL.parts(engine)),
        "target": [target.config.model_type, target.config.num_hidden_layers, target.config.hidden_size],
        "kernels": kernels_key(),
    }


CACHE = KeyedCache("calibration", "key", "timings")  # write: None on a read-only home (calibrate again next time)
cache_path, read_cache, write_cache = CACHE.path, CACHE.read, CACHE.write


@dataclass
class Calibration:
    mode: str
    choices: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    cached: bool = False
    seconds: float = 0.0
    path: str | None = None

    def to_dict(self) -> dict:
        return {
            "mode": self.mode,
            "cached": self.cached,
            "seconds": self.seconds,
            "path": self.path,
            "choices": self.choices,
            "timings": self.timings,
        }

    def summary(self) -> str:
        """One paragraph for ``specdec bench``: what was chosen, from which timings."""
        if self.mode == "off":
            return "calibration: off (stock F.linear everywhere, lean draft, fused EAGLE decoder, float32 proposers)"
        c, t = self.choices, self.timings
        src = "cached" if self.cached else f"measured in {self.seconds:.2f} s"
        lines = [f"calibration ({src}{', ' + self.path if self.path else ''}):"]
        if "threads" in c:
            ts = ", ".join(f"{n}: {us / 1000:.2f} ms" for n, us in t.get("threads", {}).items())
            lines.append(f"  threads {c['threads']} (target step {ts})")
        for part in PATHS:
            if part in c:
                ts = ", ".join(f"{p} {us:.0f} us" for p, us in t.get(part, {}).items())
                lines.append(f"  {part} forward: {c[part]} ({ts})")
        for part, p in c.get("precision", {}).items():
            ts = ", ".join(f"{q} {us:.0f} us" for q, us in t.get("precision", {}).get(part, {}).items())
            lines.append(f"  {part} weights: {p} (its decoding work after a target step: {ts})")
        for key, picks in c.get("linear", {}).items():
            rows = t.get("linear", {}).get(key, {})
            cells = [
                f"{r}:{'P' if pk else 'S'} {rows[str(r)]['stock']:.0f}/{rows[str(r)]['packed']:.0f}"
                for r, pk in zip(P.PROBE_ROWS, picks)
            ]
            lines.append(f"  linear {key:<10} rows " + "  ".join(cells))
        lines.append("  (linear cells: rows:path stock/packed us; P = oneDNN packed, S = stock F.linear)")
        return "\n".join(lines)


def _parts(engine) -> dict:
    """Proposers with more than one path: {part: proposer}."""
    out = {"target": engine.target} if len(engine.target.paths) > 1 else {}
    for name, part in (("draft", "draft"), ("eagle", "eagle")):
        prop = engine.proposers.get(name)
        if prop is not None and len(getattr(prop, "paths", ())) > 1:
            out[part] = prop
    return out


def _shapes(engine) -> set:
    lean = P.shapes_in(engine.target.lean) if engine.target.lean is not None else set()
    return P.shapes_in(engine.target.model) | lean | P.shapes_in(list(engine.proposers.values()))


def apply(engine, choices: dict) -> None:
    if "threads" in choices:
        torch.set_num_threads(int(choices["threads"]))
    P.set_plan({tuple(int(v) for v in k.split("x")): tuple(p) for k, p in choices.get("linear", {}).items()})
    for part, prop in _parts(engine).items():
        if part in choices:
            prop.use(choices[part])
    lowp_parts = CL.parts(engine)
    for part, precision in choices.get("precision", {}).items():
        if part in lowp_parts:
            lowp_parts[part].set_precision(precision)


def _stale(engine, timings: dict) -> bool:
    """Re-measure the cached plain step (a few steps, ~0.1 s) and compare (``stale``)."""
    from specdec.fast.calibrate_time import recheck

    threads = decide(timings).get("threads")
    path = timings.get("threads_on", "hf")
    if threads is None or path not in engine.target.paths:
        return True
    return stale(timings["threads"].get(str(threads)), recheck(engine, path, threads))


def calibrate(engine, mode: str = "auto") -> Calibration:
    if mode not in ("auto", "recalibrate", "off"):
        raise ValueError(f"calibration mode must be auto, recalibrate or off, got {mode!r}")
    if mode == "off" or engine.target.device.type != "cpu":
        return Calibration("off")
    t0 = time.perf_counter()
    fields = key_fields(engine)
    timings = read_cache(fields) if mode == "auto" else None
    if timings is not None and _stale(engine, timings):
        timings = None
    cached = timings is not None
    path = cache_path(fields)
    if timings is None:
        from specdec.fast.calibrate_time import measure

        timings = measure(engine, _shapes(engine), _parts(engine))
        if CL.parts(engine):  # the precisions are timed on the paths just chosen
            apply(engine, decide(timings))
            timings["precision"] = CL.measure(engine, CL.parts(engine))
        path = write_cache(fields, timings)
    choices = decide(timings)
    apply(engine, choices)
    return Calibration(mode, choices, timings, cached, time.perf_counter() - t0, str(path) if path else None)
