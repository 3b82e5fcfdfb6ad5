"""Main against a branch over repeated runs: one compact results JSON and its markdown table.

Usage: ``python -m specdec.bench.lookup_k_ab {lsp-bench,bench,replay} --main A.json,B.json --branch
C.json,D.json [--json OUT]`` (the same call pattern on each side, runs alternated).

Contract: ``merge(kind, main, branch)`` keeps of each run what the table needs, so that many runs
fit in one small file: ``lsp-bench`` (``specdec.bench.lsp_bench`` JSONs) each row's request times and
completion lengths by method; ``bench`` (``specdec bench`` JSONs) the rows' summaries (without
the calibration timings); ``replay`` (``specdec.bench.lsp_replay`` JSONs) the per-method summaries and the
model-run times. ``table(merged)`` is the markdown: per run and pooled, a method's p50 over
``none``'s, and for ``lsp-bench`` also the mean, the median of the per-position ratios, the
completions of 16 tokens or more against the shorter ones, and lookup's tau (median, and the share
of completions that accepted nothing); for ``bench`` speedup, tau, k_mean and
auto k's plain steps. Why: one run of these benches moves by more than the change under test, so
the docs quote several alternated runs, and the quoted figures are computed here, not by hand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from specdec.bench.results import write_results


def _slim(kind: str, d: dict) -> dict:
    if kind == "lsp-bench":
        rows = d["rows"]
        return {
            "config": d["config"],
            "ms": {m: [round(r["ms"], 2) for r in rs] for m, rs in rows.items()},
            "tau": {m: [round(r["tau"], 4) for r in rs] for m, rs in rows.items()},
            "tokens": [r["tokens"] for r in rows["none"]],
        }
    if kind == "bench":
        config = {k: v for k, v in d["config"].items() if k not in ("calibration", "slices")}
        keep = ("tokens_per_s", "speedup", "tau", "alpha", "k_mean", "k", "auto_plain_steps", "identical", "n_prompts")
        return {"config": config, "methods": {m: {k: r.get(k) for k in keep} for m, r in d["methods"].items()}}
    methods = {m.split()[0]: r for m, r in d["methods"].items()}
    model_ms = {m.split()[0]: [round(x, 2) for row in rs for x in row["model_ms"]] for m, rs in d["rows"].items()}
    return {"config": d["config"], "methods": methods, "model_ms": model_ms}


def merge(kind: str, main: list[str], branch: list[str], note: str = "") -> dict:
    load = lambda p: _slim(kind, json.loads(Path(p).read_text(encoding="utf-8")))  # noqa: E731
    return {"kind": kind, "note": note, "main": {p: load(p) for p in main}, "branch": {p: load(p) for p in branch}}


def _lsp_bench_row(run: dict) -> dict:
    n, lk, toks = run["ms"]["none"], run["ms"]["lookup"], run["tokens"]
    long_ = [i for i, t in enumerate(toks) if t >= 16]
    short = [i for i, t in enumerate(toks) if t < 16]
    part = lambda ix: sum(lk[i] for i in ix) / sum(n[i] for i in ix)  # noqa: E731
    return {
        "p50": statistics.median(lk) / statistics.median(n),
        "mean": sum(lk) / sum(n),
        "pair": statistics.median(b / a for a, b in zip(n, lk)),
        "long": part(long_),
        "short": part(short),
    }


def table(merged: dict) -> str:
    kind = merged["kind"]
    if kind == "lsp-bench":
        head = (
            "| side | runs | lookup p50 / none | mean / none | median per-position ratio | >= 16 tokens | < 16 tokens |"
        )
        lines = [head, "|---|---|---|---|---|---|---|"]
        for side in ("main", "branch"):
            rows = [_lsp_bench_row(r) for r in merged[side].values()]
            cells = [" ".join(f"{r[k]:.2f}" for r in rows) for k in ("p50", "mean", "pair", "long", "short")]
            lines.append(f"| {side} | {len(rows)} | " + " | ".join(cells) + " |")
        for side in ("main", "branch"):
            tau = [t for r in merged[side].values() for t in r["tau"]["lookup"]]
            nothing = sum(t <= 1.0 for t in tau) / len(tau)
            lines.append(f"{side}: lookup's median tau {statistics.median(tau):.2f}, {nothing:.0%} accept nothing")
        return "\n".join(lines)
    if kind == "bench":
        lines = [
            "| side | lookup speedup vs none | tau | k_mean | auto k plain steps | identical |",
            "|---|---|---|---|---|---|",
        ]
        for side in ("main", "branch"):
            rs = [r["methods"]["lookup"] for r in merged[side].values()]
            sp = " ".join(f"{r['speedup']:.2f}" for r in rs)
            tau = " ".join(f"{r['tau']:.2f}" for r in rs)
            km = " ".join(f"{r['k_mean']:.2f}" for r in rs)
            plain = " ".join(str(r["auto_plain_steps"]) for r in rs)
            same = " ".join(f"{r['identical']}/{r['n_prompts']}" for r in rs)
            lines.append(
                f"| {side} (k {rs[0]['k']}) | {sp} (mean {statistics.mean(r['speedup'] for r in rs):.2f}) "
                f"| {tau} | {km} | {plain} | {same} |"
            )
        return "\n".join(lines)
    lines = [
        "| side | method | model runs | model-run p50 ms | p50 / none | model-run p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    for side in ("main", "branch"):
        pooled: dict[str, list[float]] = {}
        for run in merged[side].values():
            for m, xs in run["model_ms"].items():
                pooled.setdefault(m, []).extend(xs)
        base = statistics.median(pooled["none"])
        for m, xs in pooled.items():
            xs = sorted(xs)
            p50, p95 = statistics.median(xs), xs[min(len(xs) - 1, int(0.95 * len(xs)))]
            lines.append(f"| {side} | {m} | {len(xs)} | {p50:.1f} | {p50 / base:.2f} | {p95:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec.bench.lookup_k_ab", description=__doc__.split("\n\n")[2])
    p.add_argument("kind", choices=("lsp-bench", "bench", "replay"))
    p.add_argument("--main", type=lambda s: s.split(","), required=True)
    p.add_argument("--branch", type=lambda s: s.split(","), required=True)
    p.add_argument("--note", default="", help="what the runs do not record themselves (the commits, an env var)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    merged = merge(args.kind, args.main, args.branch, args.note)
    print(table(merged), file=sys.stderr)
    write_results(merged, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
