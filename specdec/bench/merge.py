"""One bench result from several runs over consecutive slices of a prompt file.

Why: on a shared machine an exclusive measurement must stay short (a few minutes), and the full
headline run (40 prompts, 8 rows, 128 tokens) takes about 15; it is run as slices
(``specdec bench --offset A --limit N``), each interleaved within itself, and merged here.

Contract: ``merge(results) -> dict`` has the shape of one ``run_bench`` result. Sums (tokens,
seconds, identical, prompts, auto k's plain steps) add up; ``tokens_per_s`` = summed tokens /
summed seconds, and every speedup, ``fastest_plain`` and ``speedup_vs_fastest_plain`` are computed
again from those, exactly as one run computes them. tau and alpha are recombined from the counts
they imply (steps = tokens / tau, drafted = k_mean steps, accepted = alpha drafted), so they are
exact too; alpha_tested (accepted / tested) from the summed ``tested`` and ``accepted`` counts
(None where a slice predates those counts). Each row's per-category figures (``categories``,
specdec/bench/categories.py) merge the same way, category by category, with speedups against that
category's merged ``none`` and fastest plain decoding (``fastest_plain.categories``); they are
dropped when a slice lacks them. Per-prompt medians cannot be recombined:
``tokens_per_s_median`` and ``speedup_median`` are None and each slice's own figures stay in
``config.slices``. The cost-model scalars (target_ms,
c, r_score, predictions) are step-weighted means of the slices'; per-position lists are dropped.
``main`` is ``python -m specdec.bench.merge OUT.json IN.json...``, and it merges both result shapes:
``specdec bench`` slices (above) and ``specdec bench --concurrency`` grids split by levels
(results with ``levels``: ``specdec.bench.concurrency.merge``, which also writes the chart).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specdec.bench.metrics import fastest_plain

SCALARS = ("target_ms", "draft_ms_per_token", "c", "r_score", "predicted_speedup", "predicted_speedup_iid")
DROPPED = ("alpha_per_position", "conditional_alpha_per_position", "accept_rate_per_depth")


def _steps(d: dict) -> float:
    return d["total_tokens"] / d["tau"] if d.get("tau") else 0.0


def _weighted(parts: list[dict], key: str) -> float | None:
    pairs = [(d[key], _steps(d)) for d in parts if d.get(key) is not None]
    w = sum(s for _, s in pairs)
    return sum(v * s for v, s in pairs) / w if w else None


def _row(parts: list[dict]) -> dict:
    out = dict(parts[0])
    for key in ("total_tokens", "total_s", "identical", "n_prompts"):
        out[key] = sum(d[key] for d in parts)
    out["tokens_per_s"] = out["total_tokens"] / out["total_s"] if out["total_s"] else None
    out["tokens_per_s_median"] = out["speedup_median"] = None
    if "tau" in out:
        steps = sum(_steps(d) for d in parts)
        drafted = [(d.get("k_mean") or 0.0) * _steps(d) for d in parts]
        accepted = sum((d.get("alpha") or 0.0) * n for d, n in zip(parts, drafted))
        out["tau"] = out["total_tokens"] / steps if steps else None
        out["k_mean"] = sum(drafted) / steps if steps else None
        out["alpha"] = accepted / sum(drafted) if sum(drafted) else None
        if any("alpha_tested" in d for d in parts):
            if all("tested" in d and "accepted" in d for d in parts):
                out["tested"] = sum(d["tested"] for d in parts)
                out["accepted"] = sum(d["accepted"] for d in parts)
                out["alpha_tested"] = out["accepted"] / out["tested"] if out["tested"] else None
            else:  # a slice from before the counts were recorded: no exact recombination
                out["alpha_tested"] = out["tested"] = out["accepted"] = None
        out["auto_plain_steps"] = sum(d.get("auto_plain_steps") or 0 for d in parts)
        if "tree_nodes" in out:
            out["tree_nodes"] = out["k_mean"]
        for key in SCALARS:
            out[key] = _weighted(parts, key)
        for key in DROPPED:
            out.pop(key, None)
    return out


def _speedups(methods: dict, hf: dict) -> dict:
    """Every row's speedups again, from the merged tokens/s; returns ``fastest_plain``."""
    base = methods["none"]["tokens_per_s"]
    fastest = fastest_plain(methods, hf)
    for d in list(methods.values()) + list(hf.values()):
        d["speedup"] = d["tokens_per_s"] / base if base else None
        d["speedup_vs_fastest_plain"] = d["tokens_per_s"] / fastest["tokens_per_s"] if fastest["tokens_per_s"] else None
    return fastest


def _categories(results: list[dict], methods: dict, hf: dict) -> dict | None:
    """Each row's per-category figures merged like the rows (only when every slice has them),
    speedups against each category's merged none and fastest plain; returns the fastest per category."""
    rows = [{**r["methods"], **r["hf"]} for r in results]
    if not all("categories" in d for r in rows for d in r.values()):
        for d in list(methods.values()) + list(hf.values()):
            d.pop("categories", None)
        return None
    names = dict.fromkeys(c for r in rows for c in r["none"]["categories"])
    for d in list(methods.values()) + list(hf.values()):
        d["categories"] = {}  # not the first slice's dict, which the row's copy still points to
    fastest = {}
    for cat in names:
        per = {}
        for name in rows[0]:
            parts = [r[name]["categories"][cat] for r in rows if cat in r[name]["categories"]]
            per[name] = {k: v for k, v in _row(parts).items() if k in parts[0]}
        ours = {n: d for n, d in per.items() if n in methods}
        fastest[cat] = _speedups(ours, {n: d for n, d in per.items() if n in hf})
        for name, d in per.items():
            (methods.get(name) or hf[name])["categories"][cat] = d
    return fastest


def merge(results: list[dict]) -> dict:
    if not results:
        raise ValueError("nothing to merge")
    rows = [set(r["methods"]) | set(r["hf"]) for r in results]
    if any(r != rows[0] for r in rows):
        raise ValueError("the runs have different rows; merge runs of the same command only")
    methods = {n: _row([r["methods"][n] for r in results]) for n in results[0]["methods"]}
    hf = {n: _row([r["hf"][n] for r in results]) for n in results[0]["hf"]}
    fastest = _speedups(methods, hf)
    cats = _categories(results, methods, hf)
    if cats is not None:
        fastest["categories"] = cats
    config = dict(results[0]["config"])
    config["n_prompts"] = sum(r["config"]["n_prompts"] for r in results)
    config["slices"] = [
        {
            "offset": r["config"].get("offset", 0),
            "n_prompts": r["config"]["n_prompts"],
            "tokens_per_s": {n: d["tokens_per_s"] for n, d in {**r["methods"], **r["hf"]}.items()},
            "calibration": (r["config"].get("calibration") or {}).get("choices"),
        }
        for r in results
    ]
    return {"config": config, "methods": methods, "hf": hf, "fastest_plain": fastest}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specdec.bench.merge", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the merged results JSON to write")
    ap.add_argument("inputs", type=Path, nargs="+", help="results JSON of runs over consecutive prompt slices")
    args = ap.parse_args(argv)
    results = [json.loads(p.read_text()) for p in args.inputs]
    grids = ["levels" in r for r in results]
    if any(grids):
        if not all(grids):
            raise SystemExit("cannot merge a --concurrency grid with a plain bench run")
        from specdec.bench.concurrency import write_merged

        return write_merged(args.out, results)
    merged = merge(results)
    args.out.write_text(json.dumps(merged, indent=1) + "\n")
    from specdec.bench.table import format_table

    print(format_table(merged))
    print(f"wrote {args.out} ({merged['config']['n_prompts']} prompts from {len(args.inputs)} runs)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
