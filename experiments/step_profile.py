"""Where a method's time goes, per step: propose, score (the verify forward), verify + commit.

Why: with the target forward lean, a speculative method's speedup over plain decoding is set by
what a drafting step costs in plain steps against the tokens it commits. This runs each method on
the same prompts (interleaved, greedy) and splits its steps into drafting steps and plain ones
(auto k's fallback, or ``none``), reporting per kind: steps, mean ms of each phase, draft nodes,
tokens committed per step; and per method the step ratio (a drafting step's ms over ``none``'s
plain step) against tau, the pair ``proposers/fallback.py`` decides on.

Usage: ``python -m experiments.step_profile --limit 6 --methods none,draft,medusa,eagle [--k K]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from specdec.bench.results import write_results
from specdec.bench.run import load_prompts
from specdec.cli.args import DEFAULT_PROMPTS
from specdec.core.config import GenerateSpec
from specdec.engine.session import Engine


def _kind(rows: list[dict]) -> dict:
    if not rows:
        return {"steps": 0}
    mean = lambda key: statistics.fmean(r[key] for r in rows)  # noqa: E731
    return {
        "steps": len(rows),
        "propose_ms": mean("propose"),
        "score_ms": mean("score"),
        "verify_ms": mean("verify"),
        "other_ms": mean("other"),
        "step_ms": mean("total"),
        "nodes": mean("nodes"),
        "tokens": mean("tokens"),
    }


def profile(engine: Engine, prompts: list[list[int]], methods: list[str], n: int, k) -> dict:
    steps: dict[str, list[dict]] = {m: [] for m in methods}
    wall: dict[str, float] = dict.fromkeys(methods, 0.0)
    made: dict[str, int] = dict.fromkeys(methods, 0)
    for ids in prompts:
        for m in methods:
            spec = GenerateSpec(method=m, max_new_tokens=n, **({} if k is None or m == "none" else {"k": k}))
            t_start = time.perf_counter()
            last = t_start
            first = True
            for ev in engine.stream(ids, spec):
                now = time.perf_counter()
                t = ev.timings_ms
                if not first:  # the first step includes the prefill
                    total = 1000 * (now - last)
                    other = total - t["propose"] - t["score"] - t["verify"]
                    steps[m].append(dict(t, total=total, other=other, nodes=ev.draft_size, tokens=len(ev.token_ids)))
                first, last = False, now
                made[m] += len(ev.token_ids)
            wall[m] += time.perf_counter() - t_start
    out = {}
    plain_ms = None
    for m in methods:
        drafted = [r for r in steps[m] if r["nodes"] > 0]
        plain = [r for r in steps[m] if r["nodes"] == 0]
        row = {"tok_s": made[m] / wall[m], "drafting": _kind(drafted), "plain": _kind(plain)}
        if m == "none":
            plain_ms = row["plain"].get("step_ms")
        out[m] = row
    for row in out.values():
        d = row["drafting"]
        if plain_ms and d["steps"]:
            row["step_ratio"] = d["step_ms"] / plain_ms
            row["tau"] = d["tokens"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=6)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--methods", default="none,draft,medusa,eagle")
    ap.add_argument("--k", default=None, help="fixed k for every method but none (default: auto)")
    ap.add_argument("--prompts", default=str(DEFAULT_PROMPTS))
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    engine = Engine.load(calibration="auto")
    k = None if a.k is None else (a.k if a.k == "auto" else int(a.k))
    prompts = [engine.encode(p) for p in load_prompts(a.prompts, a.limit, a.offset)]
    methods = a.methods.split(",")
    profile(engine, prompts[:1], methods, 16, k)  # warm-up
    res = {"prompts": len(prompts), "max_new_tokens": a.max_new_tokens, "k": a.k}
    res["methods"] = profile(engine, prompts, methods, a.max_new_tokens, k)
    print(json.dumps(res, indent=1))
    write_results(res, a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
