"""The Teach view's "many users at once" chart: measured tokens/s against concurrency, per method.

Why: speculation and batching compete for the same compute, so the fuller the batch, the less
drafting pays; the measured crossing is the lesson. The figures are the latest shipped bench
result (``latest()``: of ``docs/results/concurrency-cpu*.json``, written by ``specdec bench
--concurrency`` or merged by ``specdec.bench.merge``, the one with the greatest ``measured_utc``;
docs/batching.md says how it was measured), drawn by the same chart code as the docs
(``specdec.figures.concurrency.chart``) as inline SVG, the demo's chart style (no plot library redraws
in the page).

Contract:
- ``stops_paying(result) -> dict``: per concurrency c, the fastest row and whether plain decoding
  (``none``) beat every fixed-k speculative row there; ``"from"`` is the smallest measured c from
  which plain decoding stays fastest (None if speculation still pays at the largest c).
- ``latest(folder) -> Path``: the grid measured last (files without ``measured_utc``, written
  before it was recorded, count as older than any with it; among those ``DEFAULT``).
- ``concurrency_html(path=None)`` (None: ``latest()``): one ``<figure data-chart="concurrency">``
  with the SVG (scaled to its column) and a caption from ``stops_paying``; a missing or unreadable
  file gives a one-line note instead (the demo keeps working).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from specdec.paths import RESULTS

RESULTS_DIR = RESULTS
DEFAULT = "concurrency-cpu.json"  # round two's grid, from before results carried measured_utc
NAMES = {"batch": "{m}", "load": "{m} + load policy", "hf_cb": "transformers CB", "vllm": "vLLM {m}"}


def _name(row: dict) -> str:
    return NAMES[row["row"]].format(m=row["method"])


def stops_paying(result: dict) -> dict:
    cells: dict[int, list[dict]] = {}
    for r in result["rows"]:
        if r["row"] in NAMES:
            cells.setdefault(r["c"], []).append(r)
    per_c, plain_wins = {}, {}
    for c in sorted(cells):
        rows = cells[c]
        best = max(rows, key=lambda r: r["tok_s"])
        none = next((r["tok_s"] for r in rows if r["row"] == "batch" and r["method"] == "none"), None)
        spec = [r["tok_s"] for r in rows if r["row"] == "batch" and r["method"] != "none"]
        plain_wins[c] = none is not None and bool(spec) and none >= max(spec)
        per_c[c] = {"best": _name(best), "best_tok_s": best["tok_s"], "none_tok_s": none, "plain_wins": plain_wins[c]}
    start = None
    for c in sorted(plain_wins, reverse=True):
        if not plain_wins[c]:
            break
        start = c
    return {"per_c": per_c, "from": start}


def latest(folder: Path = RESULTS_DIR) -> Path:
    best, when = Path(folder) / DEFAULT, ""
    for path in sorted(Path(folder).glob("concurrency-cpu*.json")):
        try:
            stamp = str(json.loads(path.read_text(encoding="utf-8")).get("measured_utc") or "")
        except (OSError, ValueError, AttributeError):
            continue
        if stamp > when:
            best, when = path, stamp
    return best


def concurrency_html(path: Path | None = None) -> str:
    path = latest() if path is None else path
    try:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
        from specdec.figures.concurrency import chart

        svg = chart(result)
        summary = stops_paying(result)
    except (OSError, ValueError, KeyError) as e:
        why = html.escape(f"{type(e).__name__}: {e}")
        return f'<p class="sd-note">No concurrency measurement to show ({why}).</p>'
    svg = re.sub(r'^<svg([^>]*?) width="\d+" height="\d+"', r'<svg\1 style="width:100%;height:auto"', svg, count=1)
    best = "; ".join(
        f"c = {c}: {html.escape(v['best'])} {v['best_tok_s']:.0f} tok/s" for c, v in summary["per_c"].items()
    )
    where = (
        f"from c = {summary['from']} on, plain decoding beats every fixed-k speculative method"
        if summary["from"] is not None
        else "speculation still pays at the largest concurrency measured"
    )
    caption = (
        f"Measured on this project's CPU ({result.get('prompts', '?')} shipped prompts, "
        f"{result.get('max_new_tokens', '?')} new tokens, greedy, every request identical to its solo run): "
        f"{where}. Fastest row per concurrency: {best}. The load policy (dotted) picks k per step from "
        "the measured cost of a forward and each method's acceptance. Tiny models trained here; "
        "docs/batching.md has the table."
    )
    return (
        '<figure class="sd-chart" data-chart="concurrency" style="max-width:760px;margin:0">'
        f"{svg}<figcaption>{caption}</figcaption></figure>"
    )
