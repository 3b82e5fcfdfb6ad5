"""How fast one loaded model completes a line here: the figure ``--model auto`` decides by.

Contract:
- ``GOAL_MS`` (150): the p50 goal of one line completion (issue 38).
- ``measure(engine, options, goal)``: the server's own path (``Completer`` over a ``LocalBackend``)
  on ``N_PROMPTS`` of the shipped code prompts (cut after a word, the document ending at the
  cursor): per prompt an untimed 1-token request a keystroke earlier (warms the target's cache, as
  in typing) and a second one (one step on that warm cache), then a timed line completion.
  Bounded: a step slower than ``goal`` stops it at once (p50 None, ``step_ms`` kept), a first
  completion slower than four times the goal stops it after that one, and so does ``BUDGET_S`` of
  measuring. Returns ``{"p50_ms", "samples_ms", "tokens" | "step_ms", "why", "date", "load"}``.
- ``meets(figures, goal)``: a measured p50 within the goal.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from pathlib import Path

from specdec.paths import DEFAULT_PROMPTS

GOAL_MS = 150.0
N_PROMPTS = 5
BUDGET_S = 20.0  # measuring one candidate never takes longer than this (plus one request)


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


def meets(figures: dict | None, goal: float = GOAL_MS) -> bool:
    return bool(figures) and figures.get("p50_ms") is not None and figures["p50_ms"] <= goal
