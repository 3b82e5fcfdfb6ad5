"""Counts for docs/suffix.md: the suffix cache's bytes per node, and a repeated workload's tau.

Usage: python -m experiments.suffix_repeat [--model tiny|smollm2-135m] [--prompts N] [--new N]
Each of N prompts (the shipped code prompts for tiny, the held-out chat prompts otherwise) is run
once, then each again after all the others (an editor or a class sending the same prompts again),
greedy, one at a time, with ``lookup`` (own context only) and with ``suffix`` (the shared cache);
prints tau and accepted tokens per pass and the cache's size, and checks every output equals plain
decoding's. Counts only: no timings are printed (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import random
import tracemalloc

from specdec.core.config import GenerateSpec
from specdec.proposers.suffix import DEPTH
from specdec.proposers.suffix_cache import SuffixCache


def node_bytes(depth: int = DEPTH, n: int = 4000) -> float:
    rng = random.Random(0)
    tracemalloc.start()
    c = SuffixCache(1024, depth)
    c.extend(c.open("a"), [rng.randrange(49152) for _ in range(n)])
    used = tracemalloc.get_traced_memory()[0] - n * 8
    tracemalloc.stop()
    return used / c.nodes


def prompts_for(model: str, count: int) -> list:
    from specdec.models.loading import ASSETS

    if model == "tiny":
        path = ASSETS / "prompts" / "code.jsonl"
        return [json.loads(x)["prompt"] for x in path.read_text().splitlines() if x.strip()][:count]
    path = ASSETS / "prompts" / "heldout" / "chat.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()][:count]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--new", type=int, default=64)
    a = ap.parse_args()
    print(f"bytes per node (depth {DEPTH}): {node_bytes():.0f}", flush=True)
    from specdec.engine.session import Engine  # noqa: PLC0415 - after the pure measurement

    if a.model == "tiny":
        engine = Engine.load()
    else:  # as the CLI loads it: the catalogue's folders, its weight format, calibrated
        from specdec.cli.args import add_model_args
        from specdec.engine.load import engine_from_args

        p = argparse.ArgumentParser()
        add_model_args(p)
        engine = engine_from_args(p.parse_args(["--model", a.model]))
    print(f"model {a.model}, target weights {engine.target.weights}", flush=True)
    rows = prompts_for(a.model, a.prompts)
    ids = [engine.encode(r if isinstance(r, str) else chat_ids(engine, r)) for r in rows]
    spec = lambda m: GenerateSpec(method=m, max_new_tokens=a.new)  # noqa: E731
    plain = [engine.generate(x, spec("none")).tokens for x in ids]
    for method in ("lookup", "suffix"):
        engine.proposers.get("suffix").configure(64)  # an empty cache for each run
        for rep in (1, 2):
            emitted = forwards = accepted = 0
            for x, want in zip(ids, plain):
                r = engine.generate(x, spec(method))
                assert r.tokens == want, "not exact"
                emitted, forwards = emitted + r.stats.emitted, forwards + r.stats.target_forwards
                accepted += r.stats.accepted
            print(f"{method} pass {rep}: tau {emitted / forwards:.3f} accepted {accepted} of {emitted}", flush=True)
        print("cache:", engine.proposers["suffix"].cache.stats())


def chat_ids(engine, row) -> str:
    from specdec.engine.chat import render

    return render(engine.tokenizer, row["messages"])


if __name__ == "__main__":
    main()
