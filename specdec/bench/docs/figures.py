"""The measured figures in docs/*.md, docs/log/*.md and README.md, written from the results JSON in docs/results.

Contract: a figure in a page is ``<!-- fig:NAME -->TEXT<!-- /fig -->``; TEXT is what NAME gives.
NAME is either
- ``FILE:PATH|FMT``: FILE a results file without ``.json`` (``bench-cpu``), PATH its dot-separated keys
  and list indices, optionally ending in a slice ``a:b`` whose items are joined with ", ", and FMT a
  format spec (``.2f``, ``.0%``, ``d``); or
- a name in ``FIGURES``: a function of the results for tables and derived numbers (fits,
  predictions, formula examples). A figure whose value has several lines (a table) sits on lines of
  its own: ``TEXT`` is then the value with a newline before and after.
The SVG files in ``SVGS`` (docs/img/memwall.svg: ``specdec.figures.memwall`` of
docs/results/bench-memwall.json) are figures too: checked and rewritten with the pages.
``python -m specdec.bench.docs.figures --check`` prints every figure whose TEXT differs from its value and
exits 1 if there is one (tests/test_doc_figures.py runs it); ``--write`` rewrites TEXT in place.
``python -m specdec.bench.docs.figures memwall --json RESULT.json --out FIG.svg`` draws the memwall
figure of any bench result (defaults: the shipped one, docs/img/memwall.svg).
Numbers quoted from papers or other projects are citations, not figures, and carry no marker.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from specdec.bench import batch_phases, step_rows
from specdec.bench import concurrency as bench_concurrency
from specdec.bench.docs import readme_bench, theory_table
from specdec.bench.docs.tables import (
    heads_table,
    load,
    lookup_match_table,
    lookup_sets_table,
    memwall_tables,
    sweep_table,
)
from specdec.core import theory as T
from specdec.figures.memwall import memwall_chart
from specdec.paths import ROOT

DOCS = ROOT / "docs"
MARK = re.compile(r"<!-- fig:(?P<name>\S+) -->(?P<text>.*?)<!-- /fig -->", re.DOTALL)


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


def alpha_tested(row: dict) -> float:
    """A bench row's pooled accepted / tested (the alpha the i.i.d. formula takes): stored as
    ``alpha_tested`` by newer benches; for older rows recovered from ``predicted_speedup_iid`` =
    expected_tokens(alpha_tested, k_mean) / (k_mean c + 1) (specdec/bench/metrics.py) by bisection,
    expected_tokens being increasing in alpha."""
    if row.get("alpha_tested") is not None:
        return row["alpha_tested"]
    k, e = row["k_mean"], row["predicted_speedup_iid"] * (row["k_mean"] * row["c"] + 1.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if T.expected_tokens(mid, k) < e else (lo, mid)
    return (lo + hi) / 2


def rows_r(batch: int, k: int) -> str:
    t = dict(zip(load("rows-cost-cpu")["config"]["rows"], load("rows-cost-cpu")["ms_median"]))
    return f"{t[batch * (k + 1)] / t[batch]:.2f}"


def rows_fit() -> tuple[float, float]:
    d = load("rows-cost-cpu")
    return T.fit_verify_cost(d["config"]["rows"], d["ms_median"])


README_BENCH, README_EDITS = "bench-cpu-quiet", "bench-edits-cpu-quiet"
FIGURES = {
    "readme_bench_table": lambda: readme_bench.table(load(README_BENCH)),
    "readme_edits_table": lambda: readme_bench.table(load(README_EDITS)),
    "readme_edits_fastest": lambda: readme_bench.fastest(load(README_EDITS)),
    "readme_fastest": lambda: readme_bench.fastest(load(README_BENCH)),
    "readme_none_vs_hf": lambda: readme_bench.ratio(load(README_BENCH), "none", "hf_greedy"),
    "readme_draft_vs_assisted": lambda: readme_bench.ratio(load(README_BENCH), "draft", "hf_assisted"),
    "readme_lookup_vs_hf": lambda: readme_bench.ratio(load(README_BENCH), "lookup", "hf_lookup"),
    "lowp_bench_table": lambda: readme_bench.table(load("bench-cpu-lowp")),
    "lowp_edits_table": lambda: readme_bench.table(load("bench-edits-cpu-lowp")),
    "lowp_none_vs_hf": lambda: readme_bench.ratio(load("bench-cpu-lowp"), "none", "hf_greedy"),
    "lowp_edits_none_vs_hf": lambda: readme_bench.ratio(load("bench-edits-cpu-lowp"), "none", "hf_greedy"),
    "lowp_draft_vs_assisted": lambda: readme_bench.ratio(load("bench-cpu-lowp"), "draft", "hf_assisted"),
    "lowp_lookup_vs_hf": lambda: readme_bench.ratio(load("bench-cpu-lowp"), "lookup", "hf_lookup"),
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
    "alpha_tested_draft": lambda: f"{alpha_tested(draft_row()):.3f}",
    "iid_tau_draft4": lambda: f"{T.expected_tokens(alpha_tested(draft_row()), 4):.2f}",
    "iid_tau_draft4_drafted": lambda: f"{T.expected_tokens(draft_row()['alpha'], 4):.2f}",
}
# the other headline, edit and contention runs (docs/bench.md): the same figures as README's
for _tag, _file in (
    ("run2", "bench-cpu-lean-run2"),
    ("contention", "bench-contention-cpu-full"),
    ("lean", "bench-cpu-lean"),
    ("lean_edits", "bench-edits-cpu-lean"),
    ("quiet2", "bench-cpu-quiet-run2"),
    ("quiet_contention", "bench-contention-cpu-quiet"),
    ("quiet_edits", "bench-edits-cpu-quiet"),
):
    FIGURES[f"{_tag}_table"] = lambda f=_file: readme_bench.table(load(f))
    FIGURES[f"{_tag}_fastest"] = lambda f=_file: readme_bench.fastest(load(f))
    for _a, _b in (("none", "hf_greedy"), ("draft", "hf_assisted"), ("lookup", "hf_lookup")):
        FIGURES[f"{_tag}_{_a}_vs_{_b}"] = lambda f=_file, a=_a, b=_b: readme_bench.ratio(load(f), a, b)


# concurrency grids (docs/batching.md): the table and the load policy's gaps, from each grid's JSON
for _tag, _file in (
    ("quiet", "concurrency-cpu-quiet"),
    ("quiet_r3", "concurrency-cpu-quiet-r3"),
    ("quiet_vllm", "concurrency-cpu-quiet-vllm"),
    ("quiet_final", "concurrency-cpu-quiet-final"),
    ("round6", "concurrency-cpu-round6"),
    ("round6_final", "concurrency-cpu-round6-final"),
    ("edits_round7", "concurrency-edits-cpu-round7"),
    ("vllm_nocache", "concurrency-vllm-nocache-cpu"),
    ("edits_vllm_nocache", "concurrency-edits-vllm-nocache-cpu"),
    ("round7", "concurrency-cpu-round7"),
    ("edits_round7_omp", "concurrency-edits-cpu-round7-omp"),
    ("round8", "concurrency-cpu-round8"),
    ("edits_round8", "concurrency-edits-cpu-round8"),
):
    FIGURES[f"grid_{_tag}"] = lambda f=_file: bench_concurrency.markdown(load(f))
    FIGURES[f"gaps_{_tag}"] = lambda f=_file: bench_concurrency.policy_gaps(load(f))


FIGURES["step_rows_table"] = lambda: step_rows.markdown(load("step-rows-cpu"))
FIGURES["phases_table"] = lambda: batch_phases.markdown(load("batch-phases-cpu"))
FIGURES["phases_edits_table"] = lambda: batch_phases.markdown(load("batch-phases-edits-cpu"))
FIGURES["memwall_tables"] = lambda: memwall_tables(load("bench-memwall"))

# whole SVG files drawn from the results, relative to the repository root
SVGS = {"docs/img/memwall.svg": lambda: memwall_chart(load("bench-memwall"))}


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
    """Every page whose figures come from the results: docs/*.md, the dated notes in docs/log/ and
    README.md."""
    return sorted(DOCS.glob("*.md")) + sorted(DOCS.glob("log/*.md")) + [ROOT / "README.md"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the figures in place")
    ap.add_argument("--check", action="store_true", help="exit 1 if a page differs from the JSON")
    ap.add_argument("figure", nargs="?", choices=["memwall"], help="draw one SVG figure from --json to --out")
    ap.add_argument("--json", type=Path, default=DOCS / "results" / "bench-memwall.json", help="a bench result")
    ap.add_argument("--out", type=Path, default=DOCS / "img" / "memwall.svg", help="where the SVG goes")
    args = ap.parse_args(argv)
    if args.figure == "memwall":
        args.out.write_text(memwall_chart(json.loads(args.json.read_text())), encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
        return 0
    bad = 0
    for rel, draw in SVGS.items():
        path, svg = ROOT / rel, draw()
        if not path.exists() or path.read_text(encoding="utf-8") != svg:
            print(f"{rel}: differs from its JSON")
            bad += 1
            if args.write:
                path.write_text(svg, encoding="utf-8")
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
