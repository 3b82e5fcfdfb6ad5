"""Prompt lookup's auto k against a fixed k on short editor completions, paired, in process.

Usage: ``python -m specdec.bench.lookup_k_trace [--limit 4] [--chars 80] [--every 2] [--max-new-tokens 16]
[--repeat 2] [--json OUT]``.

Contract: the documents of ``specdec.bench.lsp_replay`` (the shipped held-out prompts); at every
``--every``-th of the last ``--chars`` characters, the text up to there is a request of
``--max-new-tokens`` tokens, greedy, run through one in-process engine (``Engine.load()``) as
``none``, ``lookup`` with k 8 (what auto meant before it adapted) and ``lookup`` with k auto, in
rotating order, ``--repeat`` times over. Per row: the p50 and the sum of the request times, both
over ``none``'s; the median over requests of the paired ratio (the same request, the same moment);
steps, drafted tokens and auto k's plain steps; whether the tokens equal ``none``'s. Why: the
clocked typing replay (``specdec.bench.lsp_replay``) answers a different set of requests per method (cache
hits and superseded keys depend on the timing), so its per-method p50 moves more between runs than
any k rule does; here every row decodes the same requests. No healing, no stop rule: the model's
own steps only. Speed depends on the machine's load: run it under the CPU lock.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from specdec import env
from specdec.bench.results import write_results

ROWS = {"none": ("none", "auto"), "lookup_k8": ("lookup", 8), "lookup_auto": ("lookup", "auto")}


def run(args: argparse.Namespace) -> dict:
    from specdec.core.config import GenerateSpec
    from specdec.engine.session import Engine

    docs = [json.loads(ln)["prompt"] for ln in Path(args.prompts).read_text(encoding="utf-8").splitlines() if ln]
    docs = docs[: args.limit]
    engine = Engine.load(calibration="auto")
    specs = {r: GenerateSpec(method=m, k=k, max_new_tokens=args.max_new_tokens) for r, (m, k) in ROWS.items()}
    ms: dict[str, list[float]] = {r: [] for r in ROWS}
    counts = {r: {"steps": 0, "drafted": 0, "auto_plain": 0, "identical": 0} for r in ROWS}
    order = list(ROWS)
    for _ in range(args.repeat):
        for doc in docs:
            for i in range(1, args.chars + 1, args.every):
                prompt = doc[: len(doc) - args.chars + i]
                order = order[1:] + order[:1]
                got = {}
                for r in order:
                    t0 = time.perf_counter()
                    res = engine.generate(prompt, specs[r])
                    ms[r].append(1000 * (time.perf_counter() - t0))
                    got[r] = res.tokens
                    c = counts[r]
                    c["steps"] += res.stats.steps
                    c["drafted"] += res.stats.drafted
                    c["auto_plain"] += res.stats.auto_plain
                for r in ROWS:
                    counts[r]["identical"] += got[r] == got["none"]
    rounded = {r: [round(x, 2) for x in xs] for r, xs in ms.items()}
    config = {k: str(v) for k, v in vars(args).items()} | {"SPECDEC_PACKED": env.raw("SPECDEC_PACKED")}
    return {"config": config, "rows": summary(ms, counts), "ms": rounded}


def summary(ms: dict[str, list[float]], counts: dict) -> dict:
    base = ms["none"]
    out = {}
    for r, xs in ms.items():
        out[r] = {
            "n": len(xs),
            "p50_ms": statistics.median(xs),
            "p50_vs_none": statistics.median(xs) / statistics.median(base),
            "sum_vs_none": sum(xs) / sum(base),
            "median_pair_vs_none": statistics.median(b / a for a, b in zip(base, xs)),
            **counts[r],
        }
    k8, auto = ms["lookup_k8"], ms["lookup_auto"]
    out["lookup_auto"]["median_pair_vs_k8"] = statistics.median(b / a for a, b in zip(k8, auto))
    out["lookup_auto"]["sum_vs_k8"] = sum(auto) / sum(k8)
    return out


def table(rows: dict) -> str:
    head = ("n", 4), ("p50 ms", 7), ("p50/none", 8), ("sum/none", 8), ("pair/none", 9), ("drafted", 7), ("plain", 5)
    lines = [f"{'row':12} " + " ".join(f"{h:>{w}}" for h, w in head)]
    for r, d in rows.items():
        lines.append(
            f"{r:12} {d['n']:4d} {d['p50_ms']:7.1f} {d['p50_vs_none']:8.3f} {d['sum_vs_none']:8.3f} "
            f"{d['median_pair_vs_none']:9.3f} {d['drafted']:7d} {d['auto_plain']:5d}"
        )
    a = rows["lookup_auto"]
    lines.append(f"lookup_auto vs lookup_k8: median pair {a['median_pair_vs_k8']:.3f}, sum {a['sum_vs_k8']:.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from specdec.models.loading import ASSETS

    p = argparse.ArgumentParser(prog="python -m specdec.bench.lookup_k_trace", description=__doc__.split("\n\n")[2])
    p.add_argument("--prompts", type=Path, default=ASSETS / "prompts" / "code.jsonl")
    p.add_argument("--limit", type=int, default=4, help="documents (default 4)")
    p.add_argument("--chars", type=int, default=80, help="the last characters, one request per --every (default 80)")
    p.add_argument("--every", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    res = run(args)
    print(table(res["rows"]), file=sys.stderr)
    write_results(res, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
