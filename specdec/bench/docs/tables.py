"""The table figures of docs/*.md (specdec/bench/docs/figures.py names them), and the results loader.

Contract: ``load(name)`` reads ``docs/results/NAME.json`` (cached); ``table(head, rows)`` is a
markdown table; ``sweep_table``, ``heads_table``, ``lookup_sets_table``, ``lookup_match_table``
render the k sweep, the heads comparison, prompt lookup's prompt sets and its match statistics
from their results files; ``memwall_tables(result)`` a bench result's rows per prompt category
(the numbers behind ``specdec.figures.memwall``). Why a module: figures.py had outgrown the ~300-line guide.
"""

from __future__ import annotations

import json
from functools import cache

from specdec.figures.memwall import categories
from specdec.paths import RESULTS


@cache
def load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


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


def memwall_tables(result: dict) -> str:
    """One table per prompt category of a ``specdec bench`` result: every row (ours, transformers',
    llama.cpp's) with its tokens/s over the category, its ratio to llama.cpp's plain decoding there
    and how many of its outputs are identical to our ``none``'s. Rows without the category are left out."""
    rows = {**result["methods"], **(result.get("hf") or {}), **(result.get("llamacpp") or {})}
    plain = (result.get("llamacpp") or {}).get("llamacpp", {}).get("categories", {})
    parts = []
    for cat in categories(result):
        base = plain.get(cat, {}).get("tokens_per_s")
        body = []
        for name, row in rows.items():
            c = row.get("categories", {}).get(cat)
            if c is None:
                continue
            v = c["tokens_per_s"]
            vs = "-" if not base else f"{v / base:.2f}x"
            same = "-" if c.get("identical") is None else f"{c['identical']}/{c['n_prompts']}"
            body.append([f"`{name}`", f"{v:.1f}", vs, same])
        parts.append(f"**{cat}**\n\n" + table(["row", "tok/s", "vs llama.cpp plain", "identical to `none`"], body))
    return "\n\n".join(parts)
