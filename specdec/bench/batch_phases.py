"""Where the batch's wall time goes at c clients, and how far the forwards alone would carry it.

Why: the issue's goal "8 clients >= 4x one client" is a ratio of two walls. Each wall is the
target's forwards (memory-bound for decoding rows, compute-bound for prompt chunks) plus the
per-row work of every step (verify, commit, events, delivery) plus what the rows wait for
(clients, admission). This tool splits the wall of a closed-loop run into those parts on the
running machine, so docs can say which part keeps the ratio where it is and a reader can check
it on theirs, instead of guessing.

Contract: ``python -m specdec.bench.batch_phases [--levels 1,8] [--prompts P] [--limit 16] [--method none]
[--max-new 128] [--rounds 2] [--json PATH]`` loads the engine, builds one ``BatchBackend`` (its
defaults: the thread plan, folded prefill), runs one untimed closed-loop pass at the largest
level, then ``--rounds`` rounds of every level in turn (a round: ``--limit`` prompts from
``c`` client threads, ``specdec.bench.closed_loop``). Each round times, on the model thread: ``score``
(the forwards of decoding rows only), ``fold`` (forwards that also carried a prefill chunk),
``prefill`` (chunk forwards of their own), ``propose``, ``finish`` (every row's verify, commit and
event) and ``rest`` (wall minus those: delivery, admission, waiting for clients, the loop).
Per level it reports the round with the median tokens/s, and ``forward_tok_s``: tokens over the
forwards' time alone (the rate with every other part at zero). ``ratios`` gives each level
against the first, measured and forwards-only. Every round's tokens are checked identical to the
first pass's. Timing wraps the backend's methods for the run only; speed is measured, never
asserted; run under an exclusive lock (``flock /tmp/specdec-bench.lock``) on an idle machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from contextlib import contextmanager

from specdec.bench.concurrency import run_cell
from specdec.bench.results import write_results
from specdec.bench.run import load_prompts
from specdec.core.config import GenerateSpec
from specdec.paths import DEFAULT_PROMPTS

PARTS = ("score", "fold", "prefill", "propose", "finish")


@contextmanager
def timed(obj, name: str, key: str, acc: dict):
    """``obj.name`` adds its seconds to ``acc[key]`` while the block runs (then is restored)."""
    fn = getattr(obj, name)

    def wrapper(*a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            acc[key] += time.perf_counter() - t0

    setattr(obj, name, wrapper)
    try:
        yield
    finally:
        if isinstance(obj, type):
            setattr(obj, name, fn)
        else:
            delattr(obj, name)  # the instance attribute goes; the class's method shows again


def _round(backend, ids: list[list[int]], spec: GenerateSpec, c: int) -> tuple[dict, list]:
    """One closed-loop round (the concurrency bench's own cell, ``specdec.bench.concurrency.run_cell``) with
    the model thread's parts timed."""
    from specdec.serving.batch.rows import Row

    acc: dict[str, float] = defaultdict(float)
    t = backend._target
    with (
        timed(t, "score", "score", acc),
        timed(t, "step", "fold", acc),
        timed(t, "prefill_many", "prefill", acc),
        timed(backend._proposers, "propose", "propose", acc),
        timed(Row, "finish", "finish", acc),
    ):
        steps0 = backend.steps
        bench, out = run_cell(backend, ids, spec, c)
    tokens, wall = bench["tokens"], bench["wall_s"]
    forwards = acc["score"] + acc["fold"] + acc["prefill"]
    cell = {
        "c": c,
        "tokens": tokens,
        "wall_s": wall,
        "tok_s": bench["tok_s"],
        "steps": backend.steps - steps0,
        **{f"{k}_s": acc[k] for k in PARTS},
        "rest_s": wall - sum(acc[k] for k in PARTS),
        "forward_tok_s": tokens / forwards if forwards else None,
    }
    return cell, out


def run(engine, prompts: list[str], levels: list[int], method: str, max_new: int, rounds: int) -> dict:
    from specdec.serving.batch import BatchBackend

    ids = [engine.encode(p) for p in prompts]
    spec = GenerateSpec(method=method, max_new_tokens=max_new)
    backend = BatchBackend(engine, max_batch=max(levels), max_queue=len(ids) + 1)
    try:
        _, ref = _round(backend, ids, spec, max(levels))  # untimed: the thread plan learns here
        runs: dict[int, list[dict]] = {c: [] for c in levels}
        for _ in range(rounds):
            for c in levels:
                cell, out = _round(backend, ids, spec, c)
                cell["identical"] = out == ref
                runs[c].append(cell)
                print(
                    f"  c={c:<3} {cell['tok_s']:7.1f} tok/s  forwards only {cell['forward_tok_s']:7.1f}",
                    file=sys.stderr,
                )
    finally:
        backend.shutdown(10)
    cells = [
        sorted(rs, key=lambda r: r["tok_s"])[(len(rs) - 1) // 2] | {"tok_s_runs": [r["tok_s"] for r in rs]}
        for rs in runs.values()
    ]
    base = cells[0]
    ratios = [
        {
            "c": x["c"],
            "measured": x["tok_s"] / base["tok_s"],
            "forwards_only": x["forward_tok_s"] / base["forward_tok_s"],
        }
        for x in cells
    ]
    return {
        "method": method,
        "max_new_tokens": max_new,
        "prompts": len(prompts),
        "rounds": rounds,
        "cells": cells,
        "ratios": ratios,
    }


def markdown(res: dict) -> str:
    """docs/batching.md's table: per level, tok/s and seconds of each part, and the ratios."""
    head = [
        "c",
        "tok/s",
        "forwards only",
        "decode fwd s",
        "fold fwd s",
        "prefill s",
        "propose s",
        "finish s",
        "rest s",
        "steps",
    ]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for x in res["cells"]:
        vals = [x["score_s"], x["fold_s"], x["prefill_s"], x["propose_s"], x["finish_s"], x["rest_s"]]
        out.append(
            f"| {x['c']} | {x['tok_s']:.0f} | {x['forward_tok_s']:.0f} | "
            + " | ".join(f"{v:.2f}" for v in vals)
            + f" | {x['steps']} |"
        )
    ratios = "; ".join(
        f"c={r['c']}: {r['measured']:.2f}x measured, {r['forwards_only']:.2f}x forwards only" for r in res["ratios"][1:]
    )
    return "\n".join(out) + f"\n\nagainst c={res['cells'][0]['c']}: {ratios}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="1,8", help="client counts, the first is the reference (default 1,8)")
    ap.add_argument(
        "--prompts",
        default=str(DEFAULT_PROMPTS),
        help="a .jsonl or .txt of prompts (default: the shipped code prompts)",
    )
    ap.add_argument("--limit", type=int, default=16, help="prompts per round (default 16)")
    ap.add_argument("--method", default="none", help="the method every request uses (default none)")
    ap.add_argument("--max-new", type=int, default=128, help="new tokens per request (default 128)")
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per level (default 2; the median is reported)")
    ap.add_argument("--json", default=None, help="write the cells and ratios as JSON here")
    args = ap.parse_args(argv)
    from specdec.engine.session import Engine

    levels = [int(x) for x in args.levels.split(",")]
    engine = Engine.load(calibration="auto")
    res = run(engine, load_prompts(args.prompts, args.limit), levels, args.method, args.max_new, args.rounds)
    res["config"] = {"prompts_file": args.prompts, "levels": levels}
    print(markdown(res))
    write_results(res, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
