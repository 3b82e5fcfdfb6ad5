"""The benchmark harness behind ``specdec bench``: every method on the same prompts, one process.

Contract: ``run_bench(engine, prompts, rows, ...)`` runs each row (``none``, ``draft``, ``lookup``,
``draft@k=2``...; plus transformers' own ``hf_greedy``, ``hf_assisted``, ``hf_lookup`` with
``compare_hf``) on every prompt at temperature 0, interleaved (for each prompt every row runs once,
the order rotating by one from prompt to prompt), after ``warmup`` untimed rounds, and returns the
JSON-ready dict documented in docs/bench.md. ``main(args)`` is the CLI: it reads the prompt file,
loads the models, prints the table and optionally writes the JSON. A prompt file that is missing,
has a line that is not a JSON object with a non-empty "prompt" string, or holds no prompt raises
``PromptFileError`` (a ``ConfigError``) naming the file and line.

Metrics (the design guide's definitions; sums over all prompts, never averages of ratios):
- tokens/s: generated tokens / wall seconds of the whole generate call (prefill included), for our
  rows and the HF rows alike. ``tokens_per_s`` = sum tokens / sum seconds (aggregate);
  ``tokens_per_s_median`` = median over prompts of the per-prompt rate.
- speedup = tokens_per_s / tokens_per_s of ``none``; ``speedup_median`` = median over prompts of
  the per-prompt ratio. ``speedup_vs_fastest_plain`` = tokens_per_s / that of ``fastest_plain``,
  the faster of ``none`` and ``hf_greedy`` (when run): the headline figure.
- tau = emitted / target forwards; alpha = accepted / drafted; alpha_i = accepted_at[i] /
  drafted_at[i]; conditional alpha_i = accepted_at[i] / tested_at[i] (the i.i.d. theory's alpha).
- identical = prompts whose tokens equal ``none``'s (temperature 0: every exact method must).

Cost model and prediction, all from the step timings of this run:
- target_ms = median ``score`` ms of ``none``'s steps (one 1-token target forward).
- draft_ms_per_token = median over drafting steps of ``propose`` ms / draft size.
- draft rows:  c = draft_ms_per_token / target_ms (one draft forward per drafted token);
  lookup rows: c = median ``propose`` ms per step / target_ms (no model: the cost is per step).
  medusa / eagle rows (trees): c as for lookup (one head pass per step); ``tree_nodes`` = mean
  nodes per step; ``accept_rate_per_depth`` a_d = P(a node at depth d accepted | depth d tested);
  E = the measured tau (no closed form for a tree), so "predicted" checks the cost model only.
- alpha_cond = sum accepted_at / sum tested_at; k_mean = drafted / steps (mean k actually drafted).
- r_score = median ``score`` ms of the row / target_ms: verifying k+1 tokens costs more than one.
- ``predicted_speedup_iid`` = E / (k_mean c + 1)       (lookup: E / (c + 1))
  ``predicted_speedup``     = E / (k_mean c + r_score) (lookup: E / (c + r_score))
  with E = expected_tokens(alpha_cond, k_mean) = (1 - alpha^(k+1)) / (1 - alpha) of engine.theory.
  The gap between predicted and measured speedup is what the i.i.d. model leaves out: the verify
  step, Python overhead and the draft's cache resynchronisation.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from engine.calibrate import cpu_name
from engine.config import ConfigError, GenerateSpec, SamplingParams
from engine.events import Stats
from engine.methods import METHODS
from engine.theory import expected_tokens

TREE_METHODS = tuple(n for n, m in METHODS.items() if m.tree)  # their cost is per step, not per token
PER_STEP_COST = tuple(n for n, m in METHODS.items() if m.deterministic and m.drafts != "nothing")


class PromptFileError(ConfigError):
    """A prompt file that cannot be used; the message names the file and the line."""


@dataclass(frozen=True)
class Row:
    name: str
    method: str
    k: int | str | None = None


def load_prompts(path: Path | str, limit: int | None = None, offset: int = 0) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise PromptFileError(f'prompt file not found: {path} (one JSON object per line with a "prompt" string)')
    prompts: list[str] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise PromptFileError(f"{path}:{n}: not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str) or not obj["prompt"]:
            raise PromptFileError(f'{path}:{n}: expected an object with a non-empty "prompt" string')
        prompts.append(obj["prompt"])
    if not prompts:
        raise PromptFileError(f"{path} holds no prompts")
    prompts = prompts[offset:]  # a slice of the file, for runs merged by tools/bench_merge.py
    return prompts[:limit] if limit else prompts


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
        runners[r.name] = lambda x, spec=spec: engine.generate(x, spec)
    hf = {}
    if compare_hf:
        from .bench_hf import hf_runners

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
    none_steps = [ev for reps in runs["none"] for _, _, res in reps for ev in res.events]
    target_ms = _median([ev.timings_ms["score"] for ev in none_steps if ev.draft_size == 0])
    summary = {name: _throughput(runs[name], runs["none"], base) for name in names}
    methods = {}
    for r in rows:
        d = summary[r.name]
        d.update(_cost_model(r, runs[r.name], target_ms), k=r.k)
        methods[r.name] = d
    hf_out = {name: dict(summary[name], settings=settings) for name, (_, settings) in hf.items()}
    fastest = fastest_plain(methods, hf_out)
    for d in list(methods.values()) + list(hf_out.values()):
        d["speedup_vs_fastest_plain"] = _ratio(d["tokens_per_s"], fastest["tokens_per_s"])
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
        "machine": _machine(),
    }
    cal = getattr(engine, "calibration", None)
    if cal is not None:
        config["calibration"] = cal.to_dict()
    return {"config": config, "methods": methods, "hf": hf_out, "fastest_plain": fastest}


def fastest_plain(methods: dict, hf: dict) -> dict:
    """The faster of our ``none`` and transformers' greedy ``generate`` (when run): the plain
    decoding a user would otherwise run, and the honest baseline of every speedup."""
    plain = {"none": methods["none"]}
    if "hf_greedy" in hf:
        plain["hf_greedy"] = hf["hf_greedy"]
    name = max(plain, key=lambda n: plain[n]["tokens_per_s"] or 0.0)
    return {"name": name, "tokens_per_s": plain[name]["tokens_per_s"]}


def _throughput(reps_by_prompt, none_by_prompt, base) -> dict:
    tokens = sum(len(t) for reps in reps_by_prompt for t, _, _ in reps)
    seconds = sum(dt for reps in reps_by_prompt for _, dt, _ in reps)
    none_tokens = sum(len(t) for reps in none_by_prompt for t, _, _ in reps)
    none_seconds = sum(dt for reps in none_by_prompt for _, dt, _ in reps)
    per_prompt = [_median([len(t) / dt for t, dt, _ in reps]) for reps in reps_by_prompt]
    per_none = [_median([len(t) / dt for t, dt, _ in reps]) for reps in none_by_prompt]
    tps, tps_none = _ratio(tokens, seconds), _ratio(none_tokens, none_seconds)
    return {
        "tokens_per_s": tps,
        "tokens_per_s_median": _median(per_prompt),
        "speedup": _ratio(tps, tps_none),
        "speedup_median": _median([a / b for a, b in zip(per_prompt, per_none) if b]),
        "identical": sum(all(t == b for t, _, _ in reps) for reps, b in zip(reps_by_prompt, base)),
        "n_prompts": len(reps_by_prompt),
        "total_tokens": tokens,
        "total_s": seconds,
    }


def _cost_model(row: Row, reps_by_prompt, target_ms: float | None) -> dict:
    results = [res for reps in reps_by_prompt for _, _, res in reps]
    st = Stats.total([res.stats for res in results])
    steps = [ev for res in results for ev in res.events]
    drafting = [ev for ev in steps if ev.draft_size > 0]
    out = {
        "tau": st.tau,
        "alpha": st.alpha,
        "alpha_per_position": st.alpha_per_position,
        "conditional_alpha_per_position": st.conditional_alpha_per_position,
        "target_ms": target_ms,
        "draft_ms_per_token": _median([ev.timings_ms["propose"] / ev.draft_size for ev in drafting]),
        "c": None,
        "k_mean": st.drafted / st.steps if st.steps else None,
        "r_score": _ratio(_median([ev.timings_ms["score"] for ev in steps]), target_ms),
        "predicted_speedup": None,
        "predicted_speedup_iid": None,
        "auto_plain_steps": st.auto_plain,  # steps where auto k chose plain decoding
    }
    if row.method == "none":
        out.update(predicted_speedup=1.0, predicted_speedup_iid=1.0, k_mean=0.0)
        return out
    if row.method in TREE_METHODS:
        out.update(tree_nodes=out["k_mean"], accept_rate_per_depth=depth_acceptance(steps))
    if row.method in PER_STEP_COST:
        out["c"] = _ratio(_median([ev.timings_ms["propose"] for ev in steps]), target_ms)
    else:
        out["c"] = _ratio(out["draft_ms_per_token"], target_ms)
    tested = sum(st.tested_at)
    if not tested or out["c"] is None or out["r_score"] is None:
        return out
    k_mean = out["k_mean"]
    e = expected_tokens(sum(st.accepted_at) / tested, k_mean)
    if row.method in TREE_METHODS:  # no i.i.d. chain formula for a tree: use the measured tau
        e = st.tau
    cost = out["c"] if row.method in PER_STEP_COST else k_mean * out["c"]
    out.update(predicted_speedup=e / (cost + out["r_score"]), predicted_speedup_iid=e / (cost + 1.0))
    return out


def depth_acceptance(events) -> list[float | None]:
    """a_d = P(some node at depth d is accepted | the verifier tested depth d), over steps: for a
    tree, the per-depth acceptance that multiplies into tau (alpha_i divides by every node drafted
    at depth i, siblings included)."""
    reached: list[int] = []
    accepted: list[int] = []
    for ev in events:
        tested = {pc.position for pc in ev.pieces if pc.kind in ("accepted", "rejected")}
        ok = {pc.position for pc in ev.pieces if pc.kind == "accepted"}
        for d in tested:
            while len(reached) < d:
                reached.append(0)
                accepted.append(0)
            reached[d - 1] += 1
            accepted[d - 1] += d in ok
    return [a / r if r else None for a, r in zip(accepted, reached)]


def main(args) -> int:
    from app.args import load_engine

    from .bench_table import format_table

    offset = getattr(args, "offset", 0) or 0
    prompts = load_prompts(args.prompts, args.limit, offset)
    engine = load_engine(args)
    methods = args.methods or list(engine.methods)
    missing = [m for m in methods if m not in engine.methods]
    if missing:
        raise ConfigError(
            f"method(s) {', '.join(missing)} not available here (available: "
            f"{', '.join(engine.methods)}); 'draft' needs a draft model (drop --no-draft)"
        )
    rows = make_rows(methods, args.k)
    print(
        f"bench: {len(prompts)} prompts from {args.prompts}, rows: "
        f"{', '.join(r.name for r in rows)}{' + hf_*' if args.compare_hf else ''}",
        file=sys.stderr,
    )
    bench_args = (engine, prompts, rows, args.max_new_tokens, args.warmup, args.compare_hf, args.repeats)
    hf_args = (args.hf_assistant_tokens, args.hf_lookup_tokens)
    if getattr(args, "contention", False):
        from .contention import busy, running

        with busy() as proc:
            result = run_bench(*bench_args, *hf_args, progress=not args.no_progress)
            alive = running(proc)
        result["config"]["contention"] = {"busy_processes": 1, "alive_at_end": alive}
    else:
        result = run_bench(*bench_args, *hf_args, progress=not args.no_progress)
        result["config"]["contention"] = None
    result["config"]["prompts"] = str(args.prompts)
    result["config"]["offset"] = offset
    print(format_table(result))
    cal = result["config"].get("calibration")
    if cal is not None:
        print(engine.calibration.summary())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
