"""The concurrency figure: aggregate tokens/s against concurrent clients, per method and peer.

Contract: ``chart(result)`` draws a ``specdec bench --concurrency`` result (its ``rows``: "batch",
"load", "hf_cb", "vllm") as an SVG string. Pure; shared by the bench, which writes it beside its
JSON, and the demo's Teach view, which shows the shipped results.
"""

from __future__ import annotations

from specdec.figures.svgplot import DASHED, DOTTED, Series, line_chart


def chart(result: dict) -> str:
    colours = {"none": "#444444", "lookup": "#2ca02c", "draft": "#1f77b4", "medusa": "#ff7f0e", "eagle": "#9467bd"}
    series = []
    for kind, dash in (("batch", ""), ("load", DOTTED)):
        for m in dict.fromkeys(r["method"] for r in result["rows"] if r["row"] == kind):
            pts = [(r["c"], r["tok_s"]) for r in result["rows"] if r["row"] == kind and r["method"] == m]
            label = m if kind == "batch" else f"{m} + load policy"
            series.append(Series(label, [p[0] for p in pts], [p[1] for p in pts], colours.get(m, "#17becf"), dash))
    hf = [(r["c"], r["tok_s"]) for r in result["rows"] if r["row"] == "hf_cb"]
    if hf:
        series.append(Series("transformers CB", [p[0] for p in hf], [p[1] for p in hf], "#d62728", DASHED))
    for m in dict.fromkeys(r["method"] for r in result["rows"] if r["row"] == "vllm"):
        pts = [(r["c"], r["tok_s"]) for r in result["rows"] if r["row"] == "vllm" and r["method"] == m]
        colour = "#8c564b" if m == "none" else colours.get(m, "#17becf")
        series.append(Series(f"vLLM {m}", [p[0] for p in pts], [p[1] for p in pts], colour, DASHED))
    return line_chart(series, "aggregate tokens/s against concurrency", "concurrent clients", "tokens/s", None)
