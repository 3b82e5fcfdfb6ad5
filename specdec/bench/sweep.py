"""Sweep the draft length k: measured against predicted speedup per k, as JSON and an SVG plot.

Contract: ``sweep(engine, prompts, ks, methods, ...)`` runs ``specdec.bench.run.run_bench`` once with a
row per (method, k) plus ``none``, all interleaved (every row on every prompt, the order rotating),
after its own untimed warm-up, and records every generation so it can add, per row, predictions
that the bench's summary cannot make (they need the draft size of every step):

- ``predicted_textbook`` = E(alpha, k) / (k c + 1): Leviathan et al. with the nominal k, r = 1
- ``predicted_speedup``  = E(alpha, k_mean) / (k_mean c + r_score): the bench's own prediction
  (its c and r_score are ratios of medians; the other predictions use means, see ``predictions``)
- ``predicted_per_position`` = tau_pos / (k_mean c + r), where tau_pos =
  ``theory.expected_tokens_mixture(draft sizes of the steps, conditional alpha_i)``: no i.i.d.
  assumption and no mean-k shortcut (lookup: c + r, its cost is per step, not per token)
- ``predicted_step_cost`` = tau_pos x (mean step ms of none / mean step ms of the row): acceptance
  modelled, every cost (propose, score, verify, Python) measured. What is left between it and the
  measured speedup is the acceptance model's error plus prefill.
with E = ``theory.expected_tokens`` and alpha = ``alpha_cond``, the pooled accepted / tested
(``Stats.alpha_tested``, the i.i.d. formula's alpha; never accepted / drafted).
``plot(result)`` draws speedup against k as an SVG (measured solid, per-position prediction
dashed, the draft's textbook prediction dotted); ``format_rows`` is the text table. The command
line is ``specdec sweep`` (specdec/cli/sweep.py). The draft's confidence cut-off is off by default
(``--confidence 0``) so that k is the drafted length, as the theory assumes; the bench's default
(0.2) is one flag away.
"""

from __future__ import annotations

import dataclasses
import statistics

from specdec.bench.metrics import PER_STEP_COST
from specdec.core.theory import expected_tokens, expected_tokens_mixture

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


def step_summary(row: dict, results: list) -> dict:
    """What the predictions need from the recorded steps: the draft-size histogram, mean ms per
    phase and per step, the pooled conditional alpha and tau_pos (the per-position formula
    averaged over the steps' real draft sizes)."""
    events = [ev for res in results for ev in res.events]
    sizes = [ev.draft_size for ev in events]
    out = {
        "draft_size_hist": {str(n): sizes.count(n) for n in sorted(set(sizes))},
        "mean_ms": {ph: _mean([ev.timings_ms[ph] for ev in events]) for ph in ("propose", "score", "verify")},
        "step_ms": _step_ms(results),
        "alpha_cond": None,
        "tau_per_position": None,
    }
    if any(a is not None for a in row["conditional_alpha_per_position"]):
        out["alpha_cond"] = _pooled_alpha(results)
        out["tau_per_position"] = expected_tokens_mixture(
            sizes, [a or 0.0 for a in row["conditional_alpha_per_position"]]
        )
    return out


def predictions(row: dict, method: str, k, none: dict) -> dict:
    """Predicted speedups from a row's step summary and the ``none`` row's (module docstring).

    Costs are ratios of **means** (speedup is a ratio of total times): c_mean = mean propose ms per
    drafted token (lookup: per step) / none's mean score ms; r_mean = the row's mean score ms /
    none's. The bench's own ``c`` and ``r_score`` are ratios of medians, which a busy machine skews
    (a 1 ms draft call is rarely preempted, a 40 ms target call often is).
    """
    out = {
        "c_mean": None,
        "r_mean": None,
        "tau_iid": None,
        "predicted_textbook": None,
        "predicted_per_position": None,
        "predicted_step_cost": None,
    }
    tau_pos, alpha, k_mean = row.get("tau_per_position"), row.get("alpha_cond"), row.get("k_mean")
    base = (none.get("mean_ms") or {}).get("score")
    if method == "none" or tau_pos is None or not base or not k_mean:
        return out
    ms = row["mean_ms"]
    per_step = method in PER_STEP_COST  # no model forward per drafted token: the cost is per step
    c = ms["propose"] / base if per_step else ms["propose"] / k_mean / base
    r = ms["score"] / base
    out.update(
        c_mean=c,
        r_mean=r,
        tau_iid=expected_tokens(alpha, k_mean),
        predicted_textbook=expected_tokens(alpha, k) / ((c if per_step else k * c) + 1.0),
        predicted_per_position=tau_pos / ((c if per_step else k_mean * c) + r),
    )
    if none.get("step_ms") and row.get("step_ms"):
        out["predicted_step_cost"] = tau_pos * none["step_ms"] / row["step_ms"]
    return out


def add_predictions(result: dict) -> dict:
    """(Re)compute every row's predictions in place from the step summaries in ``result``."""
    none = result["methods"]["none"]
    for d in result["methods"].values():
        d.update(predictions(d, d["method"], d["k"], none))
    return result


def _pooled_alpha(results: list) -> float:
    """accepted / tested over every recorded generation (``Stats.alpha_tested``; 0 when nothing
    was tested): the alpha the i.i.d. formula takes, not accepted / drafted."""
    from specdec.core.events import Stats

    return Stats.total([res.stats for res in results]).alpha_tested or 0.0


def sweep(
    engine,
    prompts: list[str],
    ks: list[int],
    methods: list[str],
    max_new_tokens: int = 128,
    warmup: int = 1,
    confidence: float = 0.0,
    progress: bool = True,
) -> dict:
    from specdec.bench.run import make_rows, run_bench
    from specdec.core.config import GenerateSpec, SamplingParams

    rec = RecordingEngine(engine, confidence)
    rows = make_rows(methods, list(ks))
    for w in range(warmup):  # untimed, unrecorded: every row once
        x = engine.encode(prompts[w % len(prompts)])
        for r in rows:
            rec.generate(
                x,
                GenerateSpec(
                    method=r.method,
                    k=r.k or "auto",
                    max_new_tokens=max_new_tokens,
                    sampling=SamplingParams(temperature=0.0),
                ),
            )
    rec.recording = True
    result = run_bench(rec, prompts, rows, max_new_tokens, warmup=0, progress=progress)
    for r in rows:
        d = result["methods"][r.name]
        d.update(method=r.method, **step_summary(d, rec.results[(r.method, r.k or "auto")]))
    result["config"].update(sweep_ks=list(ks), confidence=confidence, warmup=warmup)
    return add_predictions(result)


def plot(result: dict, title: str) -> str:
    from specdec.figures.svgplot import DASHED, DOTTED, Series, line_chart

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
    head = (
        "row",
        "k_mean",
        "tau",
        "tau_pos",
        "alpha",
        "c",
        "r",
        "measured",
        "textbook",
        "bench",
        "per-pos",
        "step-cost",
    )
    lines = ["  ".join(f"{h:>9}" for h in head)]
    f = lambda x, s=".2f": "-" if x is None else format(x, s)
    for name, d in result["methods"].items():
        lines.append(
            "  ".join(
                f"{v:>9}"
                for v in (
                    name[:9] if len(name) <= 9 else name.replace("@k=", "@"),
                    f(d["k_mean"]),
                    f(d["tau"]),
                    f(d.get("tau_per_position")),
                    f(d.get("alpha_cond")),
                    f(d.get("c_mean"), ".3f"),
                    f(d.get("r_mean")),
                    f(d["speedup"]),
                    f(d.get("predicted_textbook")),
                    f(d["predicted_speedup"]),
                    f(d.get("predicted_per_position")),
                    f(d.get("predicted_step_cost")),
                )
            )
        )
    return "\n".join(lines)
