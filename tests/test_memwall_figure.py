"""specdec/figures/memwall.py: the per-category bar chart against the bandwidth limit.

Checks on a handmade result that the SVG is well-formed XML, draws one bar per category per row
present (our best speculative row and llama.cpp's chosen per category), puts the limit line above
every bar, and leaves out rows the result lacks; then draws a shipped bench result, which has no
llama.cpp rows and no ``memwall`` block, so it gets bars and no limit line. Also the per-category
markdown tables of specdec/bench/docs/tables.py (``memwall_tables``).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from specdec.figures.memwall import memwall_chart

NS = "{http://www.w3.org/2000/svg}"
CATS = ("chat", "code", "edits")


def _row(*tok_s: float) -> dict:
    cats = {c: {"tokens_per_s": v, "identical": 1, "n_prompts": 1} for c, v in zip(CATS, tok_s)}
    return {"tokens_per_s": sum(tok_s) / len(tok_s), "categories": cats}


def _result(llamacpp: bool = True) -> dict:
    r = {
        "config": {"categories": {c: 1 for c in CATS}},
        "methods": {"none": _row(30, 31, 32), "lookup": _row(33, 44, 74), "eagle": _row(40, 30, 29)},
        "hf": {"hf_greedy": _row(14, 15, 16), "hf_lookup": _row(11, 13, 50)},
        "memwall": {"format": "int4", "bytes_per_step": 101744640, "bandwidth_gbs": 20.36, "limit_tok_s": 200.1},
    }
    if llamacpp:
        r["llamacpp"] = {
            "llamacpp": _row(13, 12, 27),
            "llamacpp-ngram-simple": _row(27, 16, 31),
            "llamacpp-ngram-mod": _row(56, 31, 30),
        }
    return r


def _bars(svg: str) -> dict[str, dict[str, ET.Element]]:
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter(f"{NS}g"):
        if g.get("class") == "category":
            out[g.get("data-category")] = {r.get("data-row"): r for r in g.iter(f"{NS}rect") if r.get("class") == "bar"}
    return out


def _limit_y(svg: str) -> float | None:
    lines = [e for e in ET.fromstring(svg).iter(f"{NS}line") if e.get("class") == "limit"]
    assert len(lines) <= 1
    return float(lines[0].get("y1")) if lines else None


def test_one_bar_per_category_and_row_with_the_limit_above():
    svg = memwall_chart(_result())
    bars = _bars(svg)
    assert list(bars) == list(CATS)
    kinds = {
        "ours none",
        "ours best speculative",
        "transformers hf_greedy",
        "llama.cpp plain",
        "llama.cpp best speculative",
    }
    for cat, group in bars.items():
        assert set(group) == kinds, cat
    # the best speculative row is chosen per category
    assert bars["chat"]["ours best speculative"].get("data-name") == "eagle"
    assert bars["edits"]["ours best speculative"].get("data-name") == "lookup"
    assert bars["chat"]["llama.cpp best speculative"].get("data-name") == "llamacpp-ngram-mod"
    assert bars["edits"]["llama.cpp best speculative"].get("data-name") == "llamacpp-ngram-simple"
    # SVG y grows downwards: the limit (the largest value) sits above the top of every bar
    y = _limit_y(svg)
    assert y is not None and all(y < float(r.get("y")) for g in bars.values() for r in g.values())
    assert "bandwidth limit (int4 weights, 102 MB/step at 20.4 GB/s)" in svg
    # taller bar for the larger value
    assert float(bars["edits"]["ours best speculative"].get("height")) > float(bars["edits"]["ours none"].get("height"))


def test_missing_rows_are_left_out():
    r = _result(llamacpp=False)
    del r["hf"]
    svg = memwall_chart(r)
    for group in _bars(svg).values():
        assert set(group) == {"ours none", "ours best speculative"}
    assert "llama.cpp" not in svg and "hf_greedy" not in svg


def test_a_shipped_bench_result():
    path = Path(__file__).resolve().parents[1] / "docs" / "results" / "bench-smollm2.json"
    result = json.loads(path.read_text())
    svg = memwall_chart(result)
    bars = _bars(svg)
    assert set(bars) == set(result["methods"]["none"]["categories"])
    for group in bars.values():
        assert set(group) == {"ours none", "ours best speculative", "transformers hf_greedy"}
    assert _limit_y(svg) is None


def test_the_tables_per_category():
    from specdec.bench.docs.tables import memwall_tables

    text = memwall_tables(_result())
    assert [line for line in text.splitlines() if line.startswith("**")] == [f"**{c}**" for c in CATS]
    assert "| `llamacpp` | 13.0 | 1.00x | 1/1 |" in text
    assert "| `lookup` | 74.0 | 2.74x | 1/1 |" in text
    assert "| `none` | 30.0 | - | 1/1 |" in memwall_tables(_result(llamacpp=False))
