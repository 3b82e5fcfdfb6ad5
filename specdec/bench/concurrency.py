"""``specdec bench --concurrency 1,2,4,8,16``: throughput against concurrency, per method.

Contract: ``run_concurrency(engine, prompts, levels, methods, max_new_tokens, hf)`` returns a
JSON-ready dict. For each concurrency c and each method, c closed-loop clients (threads) share the
same prompt list (client j takes the next unserved prompt), each request through one
``specdec.serving.batch.BatchBackend(max_batch=max(levels))`` at temperature 0; per cell: aggregate
tokens/s (all tokens / wall time), per-request p50/p95 time to first token and tokens/s, and
``identical`` (every request's tokens equal its solo greedy run through the single-request loop,
which is also the row ``local`` at c = 1: today's one-at-a-time path, measured in every round of
the first level beside that level's cells, the median kept, so the ratios against it are not one
fast or slow minute's; each such run starts without the prompts the single-request path keeps
warm, ``specdec/models/prefixes.py``, as the batch has none; its first, untimed run gives the reference
tokens). Rows ``load`` repeat every
speculative method on a second backend with the load policy (``adaptive=True``, specdec/serving/batch/adapt.py:
a draft cap for draft and lookup, tree or plain step for medusa and eagle),
each cell right after the same method's fixed-k cell at that level, so the host's drift hits both alike.
Each cell has ``tau`` (emitted tokens per target forward) and starts with an empty suffix cache;
``--repeat-workload`` sends every prompt twice, the second time after all the others
(``specdec/bench/repeated.py``). ``repeats``
(``--repeats``) runs every cell that many times in rounds and keeps the median run (``tok_s_runs``:
all of them), so a ratio of two cells is not one slow minute's.
``hf`` adds transformers' own continuous batching (``model.generate_batch`` with
``max_requests_per_batch = c``, greedy) on
a second copy of the target (it switches the model's attention implementation), with identity
checks. ``vllm`` (``--compare-vllm none,draft``) adds vLLM's own server on the same prompts and
levels (``specdec/bench/vllm_rows.py``, rows ``vllm``). ``main(args)`` prints a table and writes
``--json`` (with ``measured_utc``: the Teach view's chart draws the grid measured last) and an SVG
chart next to it; grids measured in slices merge with ``python -m specdec.bench.merge`` (``merge``, ``write_merged``).
Speed is measured here, never asserted; run under ``flock /tmp/specdec-bench.lock``.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
import time
from pathlib import Path

from specdec.bench.closed_loop import closed_loop
from specdec.bench.repeated import cold_suffix, repeated, tau
from specdec.core.config import GenerateSpec
from specdec.figures.concurrency import chart
from specdec.models import prefixes
from specdec.serving.backend import Request
from specdec.serving.batch.adapt import ADAPTIVE, TREES


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def run_cell(backend, ids: list[list[int]], spec: GenerateSpec, c: int) -> tuple[dict, list[list[int]]]:
    out: list = [None] * len(ids)
    ttft: list[float] = []
    rates: list[float] = []
    stats: list = [None] * len(ids)
    lock = threading.Lock()

    def job(i: int) -> None:
        t0 = time.perf_counter()
        first, toks = None, []
        for ev in backend.submit(Request(ids[i], spec)):
            if first is None:
                first = time.perf_counter() - t0
            toks += ev.token_ids
            stats[i] = ev.stats
        dt = time.perf_counter() - t0
        with lock:
            out[i] = toks
            ttft.append(first or dt)
            rates.append(len(toks) / dt)

    wall = closed_loop(len(ids), c, job)
    tokens = sum(len(t) for t in out)
    cell = {
        "tokens": tokens,
        "wall_s": wall,
        "tok_s": tokens / wall,
        "ttft_p50_ms": 1000 * _pct(ttft, 0.5),
        "ttft_p95_ms": 1000 * _pct(ttft, 0.95),
        "req_tok_s_p50": _pct(rates, 0.5),
        "req_tok_s_p5": _pct(rates, 0.05),
        "tau": tau(stats),
    }
    return cell, out


def _hf_cell(model, ids: list[list[int]], c: int, max_new: int, eos: int) -> tuple[dict, list[list[int]]]:
    from transformers import GenerationConfig
    from transformers.generation.continuous_batching.continuous_api import ContinuousBatchingConfig

    gen = GenerationConfig(max_new_tokens=max_new, do_sample=False, eos_token_id=eos, pad_token_id=eos)
    cb = ContinuousBatchingConfig(max_requests_per_batch=c, num_blocks=16 * c, max_batch_tokens=256 * c)
    kw = dict(generation_config=gen, continuous_batching_config=cb, persistent_manager=True)
    model.generate_batch(inputs=ids[:c], **kw)  # untimed: the manager's set-up is paid once here
    t0 = time.perf_counter()
    res = model.generate_batch(inputs=ids, **kw)
    wall = time.perf_counter() - t0
    model.destroy_cached_continuous_batching_manager()
    by_order = sorted(res.values(), key=lambda r: int(str(r.request_id).rsplit("_", 1)[-1]))
    out = [list(r.generated_tokens) for r in by_order]
    tokens = sum(len(t) for t in out)
    return {"tokens": tokens, "wall_s": wall, "tok_s": tokens / wall}, out


def _median_cell(cells: list[tuple[dict, list[list[int]]]]) -> tuple[dict, bool]:
    """Of one cell's repeats, the run with the median tokens/s (its TTFT and per-request figures
    come with it), every run's tokens/s in ``tok_s_runs``; identical only if every run was."""
    ranked = sorted(cells, key=lambda c: c[0]["tok_s"])
    cell = dict(ranked[(len(ranked) - 1) // 2][0])
    if len(cells) > 1:
        cell["tok_s_runs"] = [c[0]["tok_s"] for c in cells]
    return cell, [c[1] for c in cells]


def run_concurrency(
    engine,
    prompts: list[str],
    levels: list[int],
    methods: list[str],
    max_new: int,
    hf: bool,
    vllm=None,
    repeats: int = 1,
):
    from specdec.serving.batch import BatchBackend
    from specdec.serving.local import LocalBackend

    ids = [engine.encode(p) for p in prompts]
    spec_of = {m: GenerateSpec(method=m, max_new_tokens=max_new) for m in methods}
    local = LocalBackend(engine)
    _, ref = run_cell(local, ids, spec_of["none"], 1)  # the reference tokens; untimed (a warm-up)
    local_runs: list = []
    rows: list[dict] = []
    adaptive = [m for m in methods if m in ADAPTIVE + TREES]
    backends = {"batch": BatchBackend(engine, max_batch=max(levels), max_queue=len(ids) + 1)}
    if adaptive:
        backends["load"] = BatchBackend(engine, max_batch=max(levels), max_queue=len(ids) + 1, adaptive=True)
    for warm in backends.values():  # warm-up: start-up timing untimed
        run_cell(warm, ids[: max(levels)], spec_of["none"], max(levels))
    cells = [(kind, m) for m in methods for kind in backends if kind == "batch" or m in adaptive]
    for c in levels:  # a method's fixed-k and load-policy cells back to back, so host drift hits both alike
        runs: dict = {cell: [] for cell in cells}
        for _ in range(repeats):  # every cell once per round: a slow minute lands in one round of each
            if c == levels[0]:  # the single-request path in every round of the first level, beside its cells
                prefixes.forget(engine.target)  # kept prompts (specdec/models/prefixes.py) would skip prefills
                local_runs.append(run_cell(local, ids, spec_of["none"], 1))
                print(f"  c=1   local       {local_runs[-1][0]['tok_s']:7.1f} tok/s", file=sys.stderr)
            for kind, m in cells:
                cold_suffix(engine)  # every cell's suffix cache starts empty (specdec/bench/repeated.py)
                cell, out = run_cell(backends[kind], ids, spec_of[m], c)
                runs[(kind, m)].append((cell, out))
                label = m if kind == "batch" else f"{m}+load"
                print(f"  c={c:<3} {label:<11} {cell['tok_s']:7.1f} tok/s  identical={out == ref}", file=sys.stderr)
        for (kind, m), done in runs.items():
            cell, outs = _median_cell(done)
            rows.append({"row": kind, "method": m, "c": c, **cell, "identical": all(o == ref for o in outs)})
    for b in [local, *backends.values()]:
        b.shutdown(10)
    del b, warm
    backends.clear()  # their KV slots (up to a quarter of the memory each) go before the peers' rows
    gc.collect()
    cell, outs = _median_cell(local_runs)
    rows.insert(0, {"row": "local", "method": "none", "c": 1, **cell, "identical": all(o == ref for o in outs)})
    not_run: list[dict] = []  # peers' cells that could not run here, with the reason
    if hf:
        from specdec.models.loading import load_model

        target = engine.target.model
        model = load_model(Path(target.config.name_or_path), "target", "cpu", target.dtype)
        eos = min(engine.eos_ids)
        for c in [lv for lv in levels if lv >= 8] or levels[-1:]:
            try:
                cell, out = _hf_cell(model, ids, c, max_new, eos)
            except MemoryError as e:  # transformers sizes its cache from the free memory: a row, not a crash
                not_run.append({"row": "hf_cb", "method": "none", "c": c, "error": str(e)})
                print(f"  c={c:<3} hf_cb   not run: {e}", file=sys.stderr)
                continue
            rows.append({"row": "hf_cb", "method": "none", "c": c, **cell, "identical": out == ref})
            print(f"  c={c:<3} hf_cb   {cell['tok_s']:7.1f} tok/s  identical={out == ref}", file=sys.stderr)
        del model
        gc.collect()
    if vllm:
        from specdec.bench.vllm_rows import vllm_rows
        from specdec.catalog.resolve import export_folders

        choice = getattr(engine, "source", None)
        rows += vllm_rows(ids, levels, max_new, ref, vllm, folders=choice and export_folders(choice))
    out = {"max_new_tokens": max_new, "prompts": len(prompts), "levels": levels, "repeats": repeats, "rows": rows}
    return out | ({"not_run": not_run} if not_run else {})


def table(result: dict) -> str:
    lines = [f"{'row':<7}{'method':<8}{'c':>4}{'tok/s':>9}{'ttft p50':>10}{'ttft p95':>10}{'req tok/s':>10}  same"]
    for r in result["rows"]:
        p50 = f"{r['ttft_p50_ms']:.0f}" if r.get("ttft_p50_ms") is not None else "-"
        p95 = f"{r['ttft_p95_ms']:.0f}" if r.get("ttft_p95_ms") is not None else "-"
        rq = f"{r['req_tok_s_p50']:.1f}" if r.get("req_tok_s_p50") is not None else "-"
        lines.append(
            f"{r['row']:<7}{r['method']:<8}{r['c']:>4}{r['tok_s']:>9.1f}{p50:>10}{p95:>10}{rq:>10}  {r['identical']}"
        )
    return "\n".join(lines)


def markdown(result: dict) -> str:
    """The table for docs/batching.md: tokens/s per row and concurrency, x the local baseline."""
    base = next(r["tok_s"] for r in result["rows"] if r["row"] == "local")
    levels = result["levels"]
    head = "| row | " + " | ".join(f"c={c}" for c in levels) + " | same |"
    lines = [head, "|---" * (len(levels) + 2) + "|"]
    lines.append(f"| local none (today) | {base:.0f} (1.0x) |" + " |" * (len(levels) - 1) + " True |")
    keys = dict.fromkeys((r["row"], r["method"]) for r in result["rows"] if r["row"] != "local")
    for kind, m in keys:
        cells = {r["c"]: r for r in result["rows"] if (r["row"], r["method"]) == (kind, m)}
        vals = [f"{cells[c]['tok_s']:.0f} ({cells[c]['tok_s'] / base:.1f}x)" if c in cells else "" for c in levels]
        same = all(r["identical"] for r in cells.values())
        name = {"batch": m, "load": f"{m} + load policy", "hf_cb": "transformers CB", "vllm": f"vLLM {m}"}[kind]
        lines.append(f"| {name} | " + " | ".join(vals) + f" | {same} |")
    ttft = [r for r in result["rows"] if r["row"] == "batch" and r["method"] == "none"]
    lines.append("")
    lines.append(
        "none, time to first token p50 / p95 (ms): "
        + ", ".join(f"c={r['c']}: {r['ttft_p50_ms']:.0f} / {r['ttft_p95_ms']:.0f}" for r in ttft)
    )
    return "\n".join(lines)


def policy_gaps(result: dict) -> str:
    """Per level, each load-policy row against the better of plain and the same method's fixed k
    (issue 15's goal: no worse than -5%), as a markdown table."""
    cell = {(r["row"], r["method"], r["c"]): r["tok_s"] for r in result["rows"]}
    methods = list(dict.fromkeys(r["method"] for r in result["rows"] if r["row"] == "load"))
    lines = ["| c | " + " | ".join(f"{m} + load vs best of none / {m}" for m in methods) + " |"]
    lines.append("|---" * (len(methods) + 1) + "|")
    for c in result["levels"]:
        cells = []
        for m in methods:
            best = max(cell.get(("batch", "none", c), 0.0), cell.get(("batch", m, c), 0.0))
            got = cell.get(("load", m, c))
            cells.append(f"{got:.0f} vs {best:.0f} ({got / best - 1:+.1%})" if got and best else "")
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def merge(results: list[dict]) -> dict:
    """One result from several runs of the same prompts and tokens over different levels (a grid
    split into calls of a few minutes each): the first run's ``local`` row is the baseline, every
    run's local figure is kept in ``local_tok_s`` (the run-to-run noise), levels in order."""
    rows = [r for res in results for r in res["rows"] if r["row"] != "local"]
    local = next(r for r in results[0]["rows"] if r["row"] == "local")
    levels = sorted({c for res in results for c in res["levels"]})
    out = {k: v for k, v in results[0].items() if k not in ("rows", "levels")}
    stamps = [res["measured_utc"] for res in results if res.get("measured_utc")]
    if stamps:
        out["measured_utc"] = max(stamps)  # the Teach view draws the grid measured last
    locals_ = [r["tok_s"] for res in results for r in res["rows"] if r["row"] == "local"]
    rows.sort(key=lambda r: ({"batch": 0, "load": 1, "hf_cb": 2, "vllm": 3}[r["row"]], r["c"]))
    return {**out, "levels": levels, "local_tok_s": locals_, "rows": [local, *rows]}


def write_merged(out: Path, ins: list[dict]) -> int:
    """Merge grids (``specdec.bench.merge`` calls this for concurrency results), write OUT.json + .svg."""
    result = merge(ins)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".svg").write_text(chart(result), encoding="utf-8")
    print(table(result))
    print(markdown(result))
    return 0


def main(args) -> int:
    from specdec.bench.prompts import load_items
    from specdec.engine.load import engine_from_args as load_engine

    items = load_items(args.prompts, args.limit or 16, 0, getattr(args, "categories", None))
    engine = load_engine(args)
    prompts = [it.text(engine.tokenizer) for it in items]  # conversations in the model's chat template
    if getattr(args, "repeat_workload", False):
        prompts = repeated(prompts)
    methods = ["none"] + [m for m in (args.methods or engine.methods) if m != "none" and m in engine.methods]
    vllm = getattr(args, "compare_vllm", None)
    result = run_concurrency(
        engine, prompts, args.concurrency, methods, args.max_new_tokens, args.compare_hf, vllm, args.repeats
    )
    result["prompts_file"] = str(args.prompts)
    result["repeat_workload"] = bool(getattr(args, "repeat_workload", False))
    result["measured_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        args.json.with_suffix(".svg").write_text(chart(result), encoding="utf-8")
        print(f"wrote {args.json} and {args.json.with_suffix('.svg')}", file=sys.stderr)
    return 0
