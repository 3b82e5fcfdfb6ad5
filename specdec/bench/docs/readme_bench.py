"""README.md's bench figures, from a ``specdec bench`` results JSON (used by specdec/bench/docs/figures.py).

Contract: ``table(result)`` is the markdown table of every row (tokens/s, speedup against the
fastest plain decoding of the run, against our ``none``, tau, alpha, identical); ``ratio(result,
a, b)`` is row a's tokens/s over row b's as ``1.23x``; ``fastest(result)`` names the run's fastest
plain decoding and its tokens/s. Why a module: the figures must come from the JSON of a run, never
be typed by hand, and figures.py is already at its size limit.
"""

from __future__ import annotations

LABELS = {
    "none": "`none` (plain decoding)",
    "draft": "`draft` (k auto)",
    "lookup": "`lookup` (k 8)",
    "medusa": "`medusa` (trained tree)",
    "eagle": "`eagle` (dynamic tree)",
    "hf_greedy": "HF `generate` greedy",
    "hf_assisted": "HF assisted generation",
    "hf_lookup": "HF prompt lookup",
}


def _label(name: str, d: dict) -> str:
    """The row's label; lookup's names the k it ran with (8 before its auto k adapted, or auto)."""
    if name == "lookup" and d.get("k") is not None:
        return f"`lookup` (k {d['k']})"
    return LABELS.get(name, f"`{name}`")


def _rows(result: dict) -> dict:
    return {**result["methods"], **result["hf"]}


def _f(x, spec: str, suffix: str = "") -> str:
    return "–" if x is None else format(x, spec) + suffix


def table(result: dict) -> str:
    head = ["row", "tokens/s", "vs fastest plain", "vs `none`", "tau", "alpha", "identical to `none`"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, d in _rows(result).items():
        cells = [
            _label(name, d),
            _f(d["tokens_per_s"], ".1f"),
            _f(d.get("speedup_vs_fastest_plain"), ".2f", "x"),
            _f(d["speedup"], ".2f", "x"),
            _f(d.get("tau"), ".2f") if name in result["methods"] else "",
            _f(d.get("alpha"), ".2f") if name in result["methods"] else "",
            f"{d['identical']}/{d['n_prompts']}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratio(result: dict, a: str, b: str) -> str:
    rows = _rows(result)
    return f"{rows[a]['tokens_per_s'] / rows[b]['tokens_per_s']:.2f}x"


def fastest(result: dict) -> str:
    f = result["fastest_plain"]
    name = "our `none`" if f["name"] == "none" else "transformers' greedy `generate`"
    return f"{name} ({f['tokens_per_s']:.1f} tok/s)"
