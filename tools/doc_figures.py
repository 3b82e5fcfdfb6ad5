"""The measured figures in docs/*.md and README.md, written from the results JSON in docs/results.

Contract: a figure in a page is ``<!-- fig:NAME -->TEXT<!-- /fig -->``; TEXT is what NAME gives.
NAME is either
- ``FILE:PATH|FMT``: FILE a results file without ``.json`` (``bench-cpu``), PATH its dot-separated keys
  and list indices, optionally ending in a slice ``a:b`` whose items are joined with ", ", and FMT a
  format spec (``.2f``, ``.0%``, ``d``); or
- a name in ``FIGURES``: a function of the results for tables and derived numbers (fits,
  predictions, formula examples). A figure whose value has several lines (a table) sits on lines of
  its own: ``TEXT`` is then the value with a newline before and after.
``python -m tools.doc_figures --check`` prints every figure whose TEXT differs from its value and
exits 1 if there is one (tests/test_doc_figures.py runs it); ``--write`` rewrites TEXT in place.
Numbers quoted from papers or other projects are citations, not figures, and carry no marker.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from functools import cache
from pathlib import Path

from engine import theory as T
from tools import doc_bench, theory_table

ROOT = Path(__file__).resolve().parents[1]
DOCS, RESULTS = ROOT / "docs", ROOT / "docs" / "results"
MARK = re.compile(r"<!-- fig:(?P<name>\S+) -->(?P<text>.*?)<!-- /fig -->", re.DOTALL)


@cache
def load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def lookup(expr: str) -> str:
    """``FILE:PATH|FMT`` (module docstring)."""
    where, _, fmt = expr.partition("|")
    file, _, path = where.partition(":")
    value = load(file)
    for key in path.split("."):
        if ":" in key and isinstance(value, list):
            a, b = (int(x) if x else None for x in key.split(":"))
            value = value[a:b]
        else:
            value = value[int(key)] if isinstance(value, list) else value[key]
    return ", ".join(format(v, fmt) for v in value) if isinstance(value, list) else format(value, fmt)


def sweep(method: str) -> list[dict]:
    return [row for name, row in load("sweep-k-cpu")["methods"].items() if name.startswith(method + "@")]


def r_fit(method: str = "draft") -> tuple[float, float]:
    rows = sweep(method)
    return T.fit_verify_cost([r["k_mean"] for r in rows], [r["r_mean"] for r in rows])


def k_pred() -> tuple[int, float, float]:
    """The optimum the i.i.d. model with the fitted r(k) predicts for the sweep's draft, with its pooled
    alpha and mean c (what tests/test_theory.py::test_linear_verify_cost_fits_the_sweep checks)."""
    rows = sweep("draft")
    alpha = sum(r["alpha_cond"] for r in rows) / len(rows)
    c = sum(r["c_mean"] for r in rows) / len(rows)
    return T.best_k_linear(alpha, c, *r_fit()), alpha, c


def table(head: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(str(x) for x in row) + " |" for row in rows])


def f2(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def sweep_table() -> str:
    rows = []
    for name, m in load("sweep-k-cpu")["methods"].items():
        if name != "none":
            rows.append(
                [
                    name.replace("@", " "),
                    f2(m["k_mean"]),
                    f2(m["tau"]),
                    f2(m["tau_per_position"]),
                    f2(m["alpha_cond"]),
                    f"{m['c_mean']:.3f}",
                    f2(m["r_mean"]),
                    f"**{m['speedup']:.2f}**",
                    f2(m["predicted_textbook"]),
                    f2(m["predicted_speedup"]),
                    f2(m["predicted_per_position"]),
                    f2(m["predicted_step_cost"]),
                ]
            )
    return table(
        [
            "row",
            "k mean",
            "tau",
            "tau_pos",
            "alpha",
            "c",
            "r",
            "**measured**",
            "textbook",
            "bench",
            "per-position",
            "step-cost",
        ],
        rows,
    )


def heads_table() -> str:
    m = load("bench-cpu")["methods"]

    def depth(row: dict, key: str) -> list[str]:
        return [f2(a) for a in row[key][:4]]

    return table(
        ["method", "tree nodes per step", "tau", "speedup", "alpha at depth 1", "2", "3", "4"],
        [
            [
                "medusa (shipped tree)",
                f2(m["medusa"]["tree_nodes"]),
                f2(m["medusa"]["tau"]),
                f"{m['medusa']['speedup']:.2f}x",
                *depth(m["medusa"], "accept_rate_per_depth"),
            ],
            [
                "eagle (dynamic tree, cost-cut)",
                f2(m["eagle"]["tree_nodes"]),
                f2(m["eagle"]["tau"]),
                f"{m['eagle']['speedup']:.2f}x",
                *depth(m["eagle"], "accept_rate_per_depth"),
            ],
            [
                "draft (k auto, for comparison)",
                "chain, " + f2(m["draft"]["k_mean"]),
                f2(m["draft"]["tau"]),
                f"{m['draft']['speedup']:.2f}x",
                *depth(m["draft"], "conditional_alpha_per_position"),
            ],
        ],
    )


def lookup_sets_table() -> str:
    rows = []
    for label, file in (("shipped code (first 20)", "bench-code20-cpu"), ("code edits", "bench-edits-cpu")):
        for meth, name in (("draft", "draft (k auto)"), ("lookup", "**lookup** (k 8)")):
            m = load(file)["methods"][meth]
            rows.append(
                [
                    label if meth == "draft" else "",
                    name,
                    f"{m['speedup']:.2f}x",
                    f"{m['speedup_median']:.2f}x",
                    f2(m["tau"]),
                    f2(m["alpha"]),
                    " ".join(f2(a) for a in m["conditional_alpha_per_position"][:4]),
                    f2(m["k_mean"]),
                    f"{m['identical']}/{m['n_prompts']}",
                ]
            )
    return table(
        [
            "prompt set (20 prompts)",
            "method",
            "speedup",
            "median per-prompt speedup",
            "tau",
            "alpha",
            "conditional alpha_1..4",
            "k mean",
            "identical",
        ],
        rows,
    )


def lookup_match_table() -> str:
    rows = []
    for name, s in load("lookup-match-cpu")["sets"].items():
        for row in ("none", "recent", "earliest", "recent_min1"):
            m = s[row]
            rows.append(
                [
                    name if row == "none" else "",
                    row,
                    f"{m['tau']:.3f}",
                    "-" if m["alpha"] is None else f"{m['alpha']:.3f}",
                    f2(m["drafted_per_step"]),
                    f"{m['match_share']:.0%}",
                    "-" if row == "none" else f"{m['from_prompt']} / {m['from_generated']}",
                    f"{m['tokens_per_s_median']:.0f}",
                    f"{m['identical']}/{m['n_prompts']}",
                ]
            )
    return table(
        [
            "prompts",
            "rule",
            "tau",
            "alpha",
            "drafted / step",
            "steps with a match",
            "accepted copies from prompt / generated",
            "tok/s (median)",
            "identical to none",
        ],
        rows,
    )


def gap(key: str, rows: list[dict] | None = None) -> str:
    """The largest relative gap of a prediction to the measured speedup over the draft rows."""
    rows = rows or sweep("draft")
    worst = max(rows, key=lambda r: abs(r[key] / r["speedup"] - 1))
    return f"{worst[key] / worst['speedup'] - 1:+.0%} at k = {worst['k']}"


def span(values: list[float], fmt: str) -> str:
    return f"{format(min(values), fmt)} to {format(max(values), fmt)}"


def sweep_identical() -> str:
    rows = load("sweep-k-cpu")["methods"].values()
    ok = all(r["identical"] == r["n_prompts"] for r in rows)
    n = load("sweep-k-cpu")["config"]["n_prompts"]
    return f"{len(rows)} rows x {n} prompts, all identical" if ok else "NOT all rows identical"


def draft_row() -> dict:
    return load("bench-cpu")["methods"]["draft"]


def rows_r(batch: int, k: int) -> str:
    t = dict(zip(load("rows-cost-cpu")["config"]["rows"], load("rows-cost-cpu")["ms_median"]))
    return f"{t[batch * (k + 1)] / t[batch]:.2f}"


def rows_fit() -> tuple[float, float]:
    d = load("rows-cost-cpu")
    return T.fit_verify_cost(d["config"]["rows"], d["ms_median"])


README_BENCH, README_EDITS = "bench-cpu-calibrated", "bench-edits-cpu-calibrated"
FIGURES = {
    "readme_bench_table": lambda: doc_bench.table(load(README_BENCH)),
    "readme_edits_table": lambda: doc_bench.table(load(README_EDITS)),
    "readme_edits_fastest": lambda: doc_bench.fastest(load(README_EDITS)),
    "readme_fastest": lambda: doc_bench.fastest(load(README_BENCH)),
    "readme_none_vs_hf": lambda: doc_bench.ratio(load(README_BENCH), "none", "hf_greedy"),
    "readme_draft_vs_assisted": lambda: doc_bench.ratio(load(README_BENCH), "draft", "hf_assisted"),
    "readme_lookup_vs_hf": lambda: doc_bench.ratio(load(README_BENCH), "lookup", "hf_lookup"),
    "optimal_k_table": theory_table.table,
    "sweep_table": sweep_table,
    "heads_table": heads_table,
    "lookup_sets_table": lookup_sets_table,
    "lookup_match_table": lookup_match_table,
    "r_fit_r0": lambda: f"{r_fit()[0]:.2f}",
    "r_fit_v": lambda: f"{r_fit()[1]:.3f}",
    "r_fit_lookup_v": lambda: f"{r_fit('lookup')[1]:.3f}",
    "k_pred": lambda: str(k_pred()[0]),
    "k_pred_alpha": lambda: f"{k_pred()[1]:.2f}",
    "k_pred_c": lambda: f"{k_pred()[2]:.2f}",
    "k_meas": lambda: str(max(sweep("draft"), key=lambda r: r["speedup"])["k"]),
    "best_speedup": lambda: f"{max(r['speedup'] for r in sweep('draft')):.2f}",
    "draft_speedup_span": lambda: span([r["speedup"] for r in sweep("draft")], ".2f"),
    "rows_t0": lambda: f"{rows_fit()[0]:.1f}",
    "rows_t1": lambda: f"{rows_fit()[1]:.3f}",
    "rows_r_1_3": lambda: rows_r(1, 3),
    "rows_r_16_3": lambda: rows_r(16, 3),
    "rows_r_8_7": lambda: rows_r(8, 7),
    "rows_logit_diff": lambda: f"{max(load('rows-cost-cpu')['row0_max_abs_logit_diff']):.1e}",
    "sweep_identical": sweep_identical,
    "gap_bench": lambda: gap("predicted_speedup"),
    "gap_pp": lambda: gap("predicted_per_position"),
    "gap_step": lambda: gap("predicted_step_cost"),
    "gap_step_lookup": lambda: gap("predicted_step_cost", sweep("lookup")),
    "textbook_span": lambda: span([r["predicted_textbook"] / r["speedup"] - 1 for r in sweep("draft")], ".0%"),
    "c_span": lambda: span([r["c_mean"] for r in sweep("draft")], ".0%"),
    "cost_span": lambda: span([r["k_mean"] * r["c_mean"] + r["r_mean"] for r in sweep("draft")], ".1f"),
    "E_inf": lambda: f"{1 / (1 - k_pred()[1]):.1f}",
    "nomatch8": lambda: "{} of {}".format(
        *(lambda h: (h["0"], sum(h.values())))(load("sweep-k-cpu")["methods"]["lookup@k=8"]["draft_size_hist"])
    ),
    "nomatch8_share": lambda: (lambda h: f"{h['0'] / sum(h.values()):.0%}")(
        load("sweep-k-cpu")["methods"]["lookup@k=8"]["draft_size_hist"]
    ),
    "ex_E": lambda: f"{T.expected_tokens(0.8, 4):.2f}",
    "ex_S": lambda: f"{T.speedup(0.8, 4, 0.05):.2f}",
    "ex_arith_1": lambda: f"{T.arithmetic_factor(0.8, 4, 0.05):.2f}",
    "ex_arith_2": lambda: f"{T.arithmetic_factor(0.6, 4, 0.1):.2f}",
    "pp_tau_draft4": lambda: f"{T.expected_tokens_per_position(draft_row()['conditional_alpha_per_position'][:4]):.2f}",
    "iid_tau_draft4": lambda: f"{T.expected_tokens(draft_row()['alpha'], 4):.2f}",
}


def value(name: str) -> str:
    return FIGURES[name]() if name in FIGURES else lookup(name)


def render(text: str) -> tuple[str, list[str]]:
    """The page with every figure rewritten, and a line for each figure that changed."""
    drift = []

    def one(m: re.Match) -> str:
        v = value(m["name"])
        want = f"\n{v}\n" if "\n" in v else v
        if m["text"] != want:
            drift.append(f"{m['name']}: {m['text'].strip()[:60]!r} -> {want.strip()[:60]!r}")
        return f"<!-- fig:{m['name']} -->{want}<!-- /fig -->"

    return MARK.sub(one, text), drift


def pages() -> list[Path]:
    """Every page whose figures come from the results: docs/*.md and README.md."""
    return sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the figures in place")
    ap.add_argument("--check", action="store_true", help="exit 1 if a page differs from the JSON")
    args = ap.parse_args(argv)
    bad = 0
    for page in pages():
        new, drift = render(page.read_text())
        for line in drift:
            print(f"{page.relative_to(ROOT)}: {line}")
        bad += len(drift)
        if args.write and drift:
            page.write_text(new)
    return 1 if bad and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
