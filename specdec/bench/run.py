"""The benchmark harness behind ``specdec bench``: every method on the same prompts, one process.

Contract: ``run_bench(engine, prompts, rows, ...)`` runs each row (``none``, ``draft``, ``lookup``,
``draft@k=2``...; plus transformers' own ``hf_greedy``, ``hf_assisted``, ``hf_lookup`` with
``compare_hf``) on every prompt at temperature 0, interleaved (for each prompt every row runs once,
the order rotating by one from prompt to prompt), after ``warmup`` untimed rounds, and returns the
JSON-ready dict documented in docs/bench.md. Given ``categories`` (one per prompt), every row also
carries its figures per category (``row["categories"][cat]``, specdec/bench/categories.py) and
``fastest_plain["categories"]`` each category's baseline. Given ``llamacpp`` (a callable from
specdec/bench/llamacpp.py), llama.cpp's rows run after ours, on the same token ids, and land in
``result["llamacpp"]`` with the same figures (speedups against our ``none``) and their agreement.
Each of our timed requests starts cold (``cold``: no cached prompt), as the peers' do.
``main(args)`` is the CLI: it reads the prompts (a file, a folder or a set name, ``--categories``,
``--limit`` per category; specdec/bench/prompts.py), loads the models, renders conversations
through the model's chat template, prints the table (and the per-category one) and optionally
writes the JSON. Unusable prompts raise ``PromptFileError`` (a ``ConfigError``, re-exported here)
naming the file and line.

Metrics and the cost model: ``specdec/bench/metrics.py`` (its docstring defines every figure).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass

from specdec.bench.categories import category_figures
from specdec.bench.llamacpp import figures as llamacpp_figures
from specdec.bench.metrics import cost_model, fastest_plain, throughput
from specdec.bench.prompts import PromptFileError, load_items, load_prompts  # noqa: F401 (re-exported)
from specdec.core.config import ConfigError, GenerateSpec, SamplingParams
from specdec.core.methods import METHODS
from specdec.fast.calibrate import cpu_name


@dataclass(frozen=True)
class Row:
    name: str
    method: str
    k: int | str | None = None


def make_rows(methods: list[str], ks: list[int | str] | None = None) -> list[Row]:
    """One row per (method, k); ``none`` first, always present, never with a k."""
    ks = list(ks or ["auto"])
    rows = [Row("none", "none")]
    for m in methods:
        if m == "none":
            continue
        for k in ks:
            fixed = k == "auto" and not METHODS[m].adaptive and METHODS[m].auto_k is not None
            k_eff = METHODS[m].auto_k if fixed else k  # auto that means a fixed k: name the k
            rows.append(Row(m if len(ks) == 1 else f"{m}@k={k}", m, k_eff))
    return list(dict.fromkeys(rows))


def _median(xs):
    return statistics.median(xs) if xs else None


def _ratio(a, b):
    return a / b if a is not None and b else None


def _machine() -> dict:
    import torch
    import transformers

    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
    }


def cold(engine) -> None:
    """Forget every cached prompt before a timed request, so it prefills from scratch as
    llama.cpp's rows (prompt cache off) and transformers' do. Without this, the rows that follow
    another of ours on the same prompt reused its prefill (the target's longest common prefix,
    kept prefixes, the draft's and EAGLE's caches), which flattered them on long prompts."""
    from specdec.models import prefixes

    prefixes.forget(engine.target)
    engine.target.reset()
    for prop in engine.proposers.values():
        forget = getattr(getattr(prop, "state", None), "forget", None)  # the draft model's and EAGLE's caches
        if forget is not None:
            forget()
        kept = getattr(prop, "kept", None)
        if kept is not None and hasattr(kept, "clear"):
            kept.clear()


def run_bench(
    engine,
    prompts: list[str],
    rows: list[Row],
    max_new_tokens: int = 128,
    warmup: int = 2,
    compare_hf: bool = False,
    repeats: int = 1,
    hf_assistant_tokens: int | None = None,
    hf_lookup_tokens: int = 10,
    progress: bool = True,
    categories: list[str] | None = None,
    llamacpp=None,
) -> dict:
    from tqdm import tqdm

    if not prompts:
        raise ConfigError("no prompts to benchmark")
    if not any(r.method == "none" for r in rows):
        rows = [Row("none", "none")] + list(rows)
    ids = []
    for i, p in enumerate(prompts):
        try:
            ids.append(engine.encode(p))
        except ConfigError as e:
            raise ConfigError(f"prompt {i + 1}: {e}") from None
    greedy = SamplingParams(temperature=0.0)
    runners = {}
    for r in rows:
        if r.method not in engine.methods:
            raise ConfigError(
                f"row {r.name}: method {r.method} is not available here (a draft model needs "
                f"--draft DIR, heads need their folders), drop it from --methods"
            )
        spec = GenerateSpec(
            method=r.method, k=r.k if r.k is not None else "auto", max_new_tokens=max_new_tokens, sampling=greedy
        )
        runners[r.name] = lambda x, spec=spec: (cold(engine), engine.generate(x, spec))[1]
    hf = {}
    if compare_hf:
        from specdec.bench.hf import hf_runners

        hf = hf_runners(engine, hf_assistant_tokens, hf_lookup_tokens)
        for name, (fn, _) in hf.items():
            runners[name] = lambda x, fn=fn: fn(x, max_new_tokens)
    names = list(runners)
    for w in range(warmup):
        for name in names:
            runners[name](ids[w % len(ids)])
    # runs[name][prompt] = list of (tokens, seconds, result or None), one per repeat
    runs: dict[str, list[list]] = {name: [[] for _ in ids] for name in names}
    bar = tqdm(
        total=len(ids) * repeats * len(names),
        desc="bench",
        unit="gen",
        disable=not progress,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    turn = 0
    for i, x in enumerate(ids):
        for _ in range(repeats):
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                bar.set_postfix_str(name, refresh=False)
                t0 = time.perf_counter()
                out = runners[name](x)
                dt = time.perf_counter() - t0
                tokens = list(out.tokens) if hasattr(out, "tokens") else list(out)
                runs[name][i].append((tokens, dt, out if hasattr(out, "stats") else None))
                bar.update(1)
            turn += 1
    bar.close()
    base = [reps[0][0] for reps in runs["none"]]
    lc_rows, lc_config = llamacpp(prompts, ids, max_new_tokens, repeats) if llamacpp else ({}, None)
    none_steps = [ev for reps in runs["none"] for _, _, res in reps for ev in res.events]
    target_ms = _median([ev.timings_ms["score"] for ev in none_steps if ev.draft_size == 0])
    summary = {name: throughput(runs[name], runs["none"], base) for name in names}
    methods = {}
    for r in rows:
        d = summary[r.name]
        d.update(cost_model(r, runs[r.name], target_ms), k=r.k)
        methods[r.name] = d
    hf_out = {name: dict(summary[name], settings=settings) for name, (_, settings) in hf.items()}
    lc_out = llamacpp_figures(lc_rows, runs["none"], base) if lc_rows else {}
    fastest = fastest_plain(methods, hf_out)
    for d in list(methods.values()) + list(hf_out.values()) + list(lc_out.values()):
        d["speedup_vs_fastest_plain"] = _ratio(d["tokens_per_s"], fastest["tokens_per_s"])
    if categories is not None:
        runs.update({name: r for name, (r, _) in lc_rows.items()})
        per_row, fastest["categories"] = category_figures(runs, base, categories, {r.name for r in rows})
        for name, d in {**methods, **hf_out, **lc_out}.items():
            d["categories"] = per_row[name]
    target = engine.target.model
    config = {
        "models": {
            "target": getattr(target, "name_or_path", None) or None,
            "draft": getattr(engine.draft_model, "name_or_path", None),
        },
        "device": str(engine.target.device),
        "dtype": str(next(target.parameters()).dtype).replace("torch.", ""),
        "max_new_tokens": max_new_tokens,
        "n_prompts": len(ids),
        "warmup": warmup,
        "repeats": repeats,
        "temperature": 0.0,
        "rows": [r.name for r in rows] + list(hf),
        "interleaved": True,
        "compare_hf": compare_hf,
        "llamacpp": lc_config,
        "machine": _machine(),
    }
    if categories is not None:
        config["categories"] = {c: categories.count(c) for c in dict.fromkeys(categories)}
    cal = getattr(engine, "calibration", None)
    if cal is not None:
        config["calibration"] = cal.to_dict()
    out = {"config": config, "methods": methods, "hf": hf_out, "fastest_plain": fastest}
    return out | ({"llamacpp": lc_out} if llamacpp else {})


def main(args) -> int:
    from specdec.bench.memwall import describe, memwall
    from specdec.bench.table import format_categories, format_table
    from specdec.engine.load import engine_from_args as load_engine

    offset = getattr(args, "offset", 0) or 0
    items = load_items(args.prompts, args.limit, offset, getattr(args, "categories", None))
    engine = load_engine(args)
    prompts = [it.text(engine.tokenizer) for it in items]  # conversations in the model's chat template
    cats = [it.category for it in items]
    for it, text in zip(items, prompts):  # name the file and line of a prompt the model cannot take
        try:
            engine.encode(text)
        except ConfigError as e:
            raise PromptFileError(f"{it.where} ({it.category}): {e}") from None
    methods = args.methods or list(engine.methods)
    missing = [m for m in methods if m not in engine.methods]
    if missing:
        raise ConfigError(
            f"method(s) {', '.join(missing)} not available here (available: "
            f"{', '.join(engine.methods)}); 'draft' needs a draft model (drop --no-draft)"
        )
    rows = make_rows(methods, args.k)
    print(
        f"bench: {len(prompts)} prompts ({', '.join(f'{c} {cats.count(c)}' for c in dict.fromkeys(cats))}) "
        f"from {args.prompts}, rows: "
        f"{', '.join(r.name for r in rows)}{' + hf_*' if args.compare_hf else ''}",
        file=sys.stderr,
    )
    bench_args = (engine, prompts, rows, args.max_new_tokens, args.warmup, args.compare_hf, args.repeats)
    hf_args = (args.hf_assistant_tokens, args.hf_lookup_tokens)
    opts = {"progress": not args.no_progress, "categories": cats}
    if getattr(args, "compare_llamacpp", False):  # built and checked before our rows run
        from specdec.bench.llamacpp import LlamaCppError, runner_for
        from specdec.bench.llamacpp_build import BuildError

        try:
            opts["llamacpp"] = runner_for(engine, args.target, getattr(args, "llamacpp_threads", None))
        except (LlamaCppError, BuildError) as e:
            print(f"specdec bench: error: {e}", file=sys.stderr)
            return 2
    if getattr(args, "contention", False):
        from specdec.bench.contention import busy, running

        with busy() as proc:
            result = run_bench(*bench_args, *hf_args, **opts)
            alive = running(proc)
        result["config"]["contention"] = {"busy_processes": 1, "alive_at_end": alive}
    else:
        result = run_bench(*bench_args, *hf_args, **opts)
        result["config"]["contention"] = None
    result["config"]["prompts"] = str(args.prompts)
    result["config"]["offset"] = offset
    none = result["methods"].get("none")
    result["memwall"] = memwall(engine, none and none["tokens_per_s"], getattr(engine, "weight_timings", None))
    print(format_table(result))
    print(describe(result["memwall"]))
    if len(result["config"]["categories"]) > 1:
        print(format_categories(result))
    cal = result["config"].get("calibration")
    if cal is not None:
        print(engine.calibration.summary())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
