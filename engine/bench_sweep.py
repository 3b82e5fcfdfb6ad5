"""Sweep the draft length k: measured against predicted speedup per k, as JSON and an SVG plot.

Contract: ``sweep(engine, prompts, ks, methods, ...)`` runs ``engine.bench.run_bench`` once with a
row per (method, k) plus ``none``, all interleaved (every row on every prompt, the order rotating),
after its own untimed warm-up, and records every generation so it can add, per row, predictions
that the bench's summary cannot make (they need the draft size of every step):

- ``predicted_textbook`` = E(alpha, k) / (k c + 1): Leviathan et al. with the nominal k, r = 1
- ``predicted_speedup``  = E(alpha, k_mean) / (k_mean c + r_score): the bench's own prediction
- ``predicted_per_position`` = tau_pos / (k_mean c + r_score), where tau_pos =
  ``theory.expected_tokens_mixture(draft sizes of the steps, conditional alpha_i)``: no i.i.d.
  assumption and no mean-k shortcut (lookup: c + r_score, its cost is per step, not per token)
- ``predicted_step_cost`` = tau_pos x (mean step ms of none / mean step ms of the row): acceptance
  modelled, every cost (propose, score, verify, Python) measured. What is left between it and the
  measured speedup is the acceptance model's error plus prefill.
with E = ``theory.expected_tokens`` and alpha = the pooled conditional acceptance rate.
``plot(result)`` draws speedup against k as an SVG (measured solid, per-position prediction
dashed, the draft's textbook prediction dotted); ``format_rows`` is the text table. The command
line is ``specdec sweep`` (app/sweep_cli.py). The draft's confidence cut-off is off by default
(``--confidence 0``) so that k is the drafted length, as the theory assumes; the bench's default
(0.2) is one flag away.
"""
from __future__ import annotations

import dataclasses
import statistics

from .theory import expected_tokens, expected_tokens_mixture

COLOURS = {"draft": "#1f77b4", "lookup": "#d62728", "medusa": "#2ca02c", "eagle": "#9467bd"}


class RecordingEngine:
    """The engine with the draft's confidence cut-off set and every generation recorded by
    (method, k) while ``recording`` is on; everything else is the engine's own."""

    def __init__(self, engine, confidence: float) -> None:
        self._engine, self.confidence, self.recording = engine, confidence, False
        self.results: dict[tuple[str, object], list] = {}

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def generate(self, prompt, spec):
        spec = dataclasses.replace(spec, confidence=self.confidence)
        res = self._engine.generate(prompt, spec)
        if self.recording:
            self.results.setdefault((spec.method, spec.k), []).append(res)
        return res


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _step_ms(results: list) -> float | None:
    return _mean([sum(ev.timings_ms.values()) for res in results for ev in res.events])


def extra_predictions(row: dict, method: str, k, results: list, none_step_ms: float | None) -> dict:
    """The predictions that need each step's draft size; see the module docstring."""
    events = [ev for res in results for ev in res.events]
    sizes = [ev.draft_size for ev in events]
    alphas = [a or 0.0 for a in row["conditional_alpha_per_position"]]
    tested = [a for a in row["conditional_alpha_per_position"] if a is not None]
    out = {"draft_size_hist": {str(n): sizes.count(n) for n in sorted(set(sizes))},
           "mean_ms": {ph: _mean([ev.timings_ms[ph] for ev in events]) for ph in ("propose", "score", "verify")},
           "step_ms": _step_ms(results), "tau_iid": None, "tau_per_position": None,
           "predicted_textbook": None, "predicted_per_position": None, "predicted_step_cost": None}
    c, r, k_mean = row.get("c"), row.get("r_score"), row.get("k_mean")
    if method == "none" or not tested or c is None or r is None:
        return out
    alpha = _pooled_alpha(results)
    tau_pos = expected_tokens_mixture(sizes, alphas)
    cost = c if method == "lookup" else k_mean * c
    out.update(alpha_cond=alpha, tau_iid=expected_tokens(alpha, k_mean), tau_per_position=tau_pos,
               predicted_textbook=expected_tokens(alpha, k) / ((c if method == "lookup" else k * c) + 1.0),
               predicted_per_position=tau_pos / (cost + r))
    if none_step_ms and out["step_ms"]:
        out["predicted_step_cost"] = tau_pos * none_step_ms / out["step_ms"]
    return out


def _pooled_alpha(results: list) -> float:
    from .events import Stats
    st = Stats.total([res.stats for res in results])
    return sum(st.accepted_at) / max(1, sum(st.tested_at))


def sweep(engine, prompts: list[str], ks: list[int], methods: list[str], max_new_tokens: int = 128,
          warmup: int = 1, confidence: float = 0.0, progress: bool = True) -> dict:
    from .bench import make_rows, run_bench
    from .config import GenerateSpec, SamplingParams
    rec = RecordingEngine(engine, confidence)
    rows = make_rows(methods, list(ks))
    for w in range(warmup):  # untimed, unrecorded: every row once
        x = engine.encode(prompts[w % len(prompts)])
        for r in rows:
            rec.generate(x, GenerateSpec(method=r.method, k=r.k or "auto", max_new_tokens=max_new_tokens,
                                         sampling=SamplingParams(temperature=0.0)))
    rec.recording = True
    result = run_bench(rec, prompts, rows, max_new_tokens, warmup=0, progress=progress)
    none_step_ms = _step_ms(rec.results[("none", "auto")])
    for r in rows:
        d = result["methods"][r.name]
        d.update(method=r.method, **extra_predictions(d, r.method, r.k, rec.results[(r.method, r.k or "auto")],
                                                      none_step_ms))
    result["config"].update(sweep_ks=list(ks), confidence=confidence, warmup=warmup)
    return result


def plot(result: dict, title: str) -> str:
    from .svgplot import DASHED, DOTTED, Series, line_chart
    series = []
    for method in dict.fromkeys(d["method"] for d in result["methods"].values() if d["method"] != "none"):
        rows = sorted((d for d in result["methods"].values() if d["method"] == method), key=lambda d: d["k"])
        ks = [d["k"] for d in rows]
        colour = COLOURS.get(method, "#444")
        series.append(Series(f"{method} measured", ks, [d["speedup"] for d in rows], colour))
        series.append(Series(f"{method} per-position", ks, [d["predicted_per_position"] for d in rows], colour, DASHED))
        if method == "draft":
            series.append(Series(f"{method} textbook", ks, [d["predicted_textbook"] for d in rows], colour, DOTTED))
    return line_chart(series, title, "k (draft tokens per step)", "speedup over plain decoding")


def format_rows(result: dict) -> str:
    head = ("row", "k_mean", "tau", "tau_pos", "alpha", "c", "r", "measured", "textbook", "bench", "per-pos",
            "step-cost")
    lines = ["  ".join(f"{h:>9}" for h in head)]
    f = lambda x, s=".2f": "-" if x is None else format(x, s)
    for name, d in result["methods"].items():
        lines.append("  ".join(f"{v:>9}" for v in (
            name[:9] if len(name) <= 9 else name.replace("@k=", "@"), f(d["k_mean"]), f(d["tau"]),
            f(d.get("tau_per_position")), f(d.get("alpha_cond")), f(d["c"], ".3f"), f(d["r_score"]),
            f(d["speedup"]), f(d.get("predicted_textbook")), f(d["predicted_speedup"]),
            f(d.get("predicted_per_position")), f(d.get("predicted_step_cost")))))
    return "\n".join(lines)
