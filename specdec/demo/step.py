"""Step-through: one verification step at a time, with the verifier's own record of that step.

Contract:
- ``record_spec(spec)`` is the request's spec with ``verifier_record=True``: the engine then puts
  the verifier's record (specdec/core/record.py) in every StepEvent; nothing here recomputes p, q, u or a
  residual, it only lays the record out.
- ``Walk`` holds one recorded run's events and the step shown (``at``); ``next()`` / ``to_end()``
  move it. The run is decoded first (a short run takes a second or two) and then walked, so Next,
  Play at a pace and Run to end cost the engine nothing and a class can go back over it.
- ``panel_html(event)`` is the verifier panel: every drafted token (tested or not) with p(x), q(x),
  min(1, p/q), the uniform u drawn (or why none was), the verdict, and after each rejection the
  residual norm(max(p - q, 0)) it moved on to as bars of its top tokens; then the token that ended
  the step and the row it was sampled from. The table sits in a box that scrolls sideways when the
  panel is narrower than it (a phone); a rejected row strikes through its token, never its verdict.
  Each row carries ``data-*`` attributes with the
  engine's numbers, and the record itself follows as JSON (the browser test compares the two).
- ``walk_html(walk)`` is the stream so far, the current step's tokens outlined.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field, replace
from typing import Any

from specdec.core.config import GenerateSpec
from specdec.core.events import StepEvent
from specdec.demo import render as R
from specdec.demo import wording as W

STRUCK = "text-decoration:line-through"
VERDICT_STYLE = {  # the verdict's words are never struck through: only a rejected token is
    "accepted": R.KIND_STYLE["accepted"],
    "rejected": R.KIND_STYLE["rejected"].replace(";" + STRUCK, ""),
    "untested": "color:#64748b;font-style:italic",
}
MONO = "font-family:ui-monospace,Menlo,Consolas,monospace"


def record_spec(spec: GenerateSpec) -> GenerateSpec:
    return replace(spec, verifier_record=True)


@dataclass
class Walk:
    events: list[StepEvent] = field(default_factory=list)
    at: int = -1  # index of the step shown; -1 before the first
    greedy: bool = False  # temperature 0: the table says the argmax rule, not p = 0 and q = 1
    eos_ids: frozenset[int] = frozenset()  # the model's end-of-text ids: drawn as render.END_MARK

    @property
    def done(self) -> bool:
        return bool(self.events) and self.at >= len(self.events) - 1

    def next(self) -> Walk:
        if self.events and not self.done:
            self.at += 1
        return self

    def to_end(self) -> Walk:
        self.at = len(self.events) - 1
        return self

    @property
    def current(self) -> StepEvent | None:
        return self.events[self.at] if 0 <= self.at < len(self.events) else None


def _tok(text: str) -> str:
    return html.escape(R.visible_text(R.Piece(0, text, "rejected", 0, 0)))


def _num(x: float | None, fmt: str = ".4f") -> str:
    return "-" if x is None else format(x, fmt)


def _bars(tops: list[dict[str, Any]], title: str) -> str:
    if not tops:
        return ""
    rows = "".join(
        f'<div class="sd-bar" data-token="{t["token"]}" data-prob="{t["prob"]:.6g}" style="display:flex;'
        f'align-items:center;gap:6px;font-size:12px"><code style="{MONO};min-width:7em">{_tok(t["text"])}</code>'
        f'<span style="display:inline-block;height:10px;width:{max(1, round(200 * t["prob"]))}px;'
        f'background:#f59e0b"></span><span>{t["prob"]:.3f}</span></div>'
        for t in tops
    )
    head = f'<div style="font-size:12px;opacity:.8">{title}</div>'
    return f'<div class="sd-residual" style="margin:2px 0 6px 2em">{head}{rows}</div>'


def _u_text(node: dict[str, Any]) -> str:
    if node["verdict"] == "untested":
        return "-"
    if node["u"] is None:
        return "none drawn (ratio 1)" if node["ratio"] >= 1.0 else "none drawn (ratio 0)"
    return f"{node['u']:.4f}"


def _greedy_cells(node: dict[str, Any], p_shown: float, argmax: str | None) -> list[str]:
    """p(x), q(x), min(1, p/q), u and the verdict at temperature 0, where p and q are one-hot."""
    v = node["verdict"]
    p_txt = "1 (the target's argmax)" if p_shown >= 0.5 else "0 (not the target's argmax)"
    why = "untested (after a rejection)" if v == "untested" else W.greedy_rule(v, argmax)
    rule = "-" if v == "untested" else "argmax rule"
    return [p_txt, "1 (the draft's pick)", rule, "none drawn (temperature 0)" if v != "untested" else "-", why]


def _row(node: dict[str, Any], greedy: bool = False, argmax: str | None = None) -> str:
    v = node["verdict"]
    tested = v != "untested"
    p_shown = node.get("p_test", node["p"])
    attrs = (
        f'data-node="{node["node"]}" data-verdict="{v}" data-token="{node["token"]}" data-p="{p_shown:.9g}" '
        f'data-q="{node["q"]:.9g}"'
        + (
            f' data-ratio="{node["ratio"]:.9g}" data-u="{"" if node["u"] is None else format(node["u"], ".9g")}"'
            if tested
            else ""
        )
    )
    why = {
        "accepted": "accepted (u < min(1, p/q))",
        "rejected": "rejected (u >= min(1, p/q))",
        "untested": "untested (after a rejection)",
    }[v]
    numbers = [_num(p_shown), _num(node["q"]), _num(node.get("ratio")), _u_text(node), why]
    if greedy:
        numbers = _greedy_cells(node, p_shown, argmax)
    cells = [
        str(node["depth"]),
        f'<code style="{MONO}{";" + STRUCK if v == "rejected" else ""}">{_tok(node["text"])}</code>',
        *numbers[:4],
        f'<span class="sd-verdict" style="{VERDICT_STYLE[v]};padding:0 4px;border-radius:3px">'
        f"{html.escape(numbers[4])}</span>",
    ]
    row = f'<tr class="sd-check" {attrs}>' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
    if v == "rejected":
        bars = _bars(node.get("residual", []), "residual norm(max(p - q, 0)): the next try samples from it")
        row += f'<tr class="sd-residual-row"><td></td><td colspan="6">{bars}</td></tr>'
    return row


def argmax_at(rec: dict[str, Any]) -> dict[int, str]:
    """Depth -> text of the token the step kept there (an accepted node, else the recovered token):
    at temperature 0 the target's argmax, which a rejected node at that depth was not."""
    out = {n["depth"]: n["text"] for n in rec["nodes"] if n["verdict"] == "accepted"}
    final = rec.get("final") or {}
    rejected = [n["depth"] for n in rec["nodes"] if n["verdict"] == "rejected" and n["depth"] not in out]
    if final.get("kind") == "recovered" and rejected:
        out[max(rejected)] = final["text"]
    return out


def panel_html(event: StepEvent | None, greedy: bool = False) -> str:
    if event is None:
        return (
            '<div class="sd-panel" style="opacity:.7">Press <b>Start</b>: the run is decoded with the '
            "verifier's record, then shown one step at a time.</div>"
        )
    rec = event.verifier or {"nodes": [], "final": {}}
    head = "".join(
        f"<th style='text-align:left;padding:2px 6px'>{h}</th>"
        for h in ("depth", "token x", "p(x)", "q(x)", "min(1, p/q)", "uniform u", "verdict")
    )
    argmax = argmax_at(rec) if greedy else {}
    body = "".join(_row(n, greedy, argmax.get(n["depth"])) for n in rec["nodes"])
    table = (
        f"<div class='sd-record-wrap' style='overflow-x:auto;max-width:100%'><table class='sd-record' "
        f"style='border-collapse:collapse;font-size:13px'><tr>{head}</tr>{body}</table></div>"
        if rec["nodes"]
        else "<p>Nothing was drafted in this step: a plain decoding step (one token from p).</p>"
    )
    final = rec.get("final") or {}
    source = {
        "bonus": "p after the last accepted token (bonus)",
        "recovered": "the residual after the rejection",
        "plain": "p",
    }
    fin = ""
    if final:
        fin = (
            f'<p class="sd-final" data-token="{final["token"]}" data-kind="{final["kind"]}">Then one token is '
            f'sampled from {source.get(final["kind"], "p")}: <code style="{MONO}">{_tok(final["text"])}</code> '
            f"({final['kind']}).</p>" + _bars(final.get("from", []), "the row it was sampled from (top tokens)")
        )
    raw = html.escape(json.dumps(rec, indent=1))
    return (
        f'<div class="sd-panel" data-step="{event.step}"><h4 style="margin:4px 0">step {event.step}: the verifier\'s '
        f"record</h4>{table}{fin}<details><summary style='font-size:12px'>the step event's record (JSON)</summary>"
        f'<pre class="sd-raw" style="font-size:11px;max-height:240px;overflow:auto">{raw}</pre></details></div>'
    )


def walk_html(walk: Walk, prompt: str) -> str:
    t = R.Transcript(prompt=prompt, greedy=walk.greedy, eos_ids=walk.eos_ids).extend(walk.events[: walk.at + 1])
    cur = walk.current.step if walk.current else None
    status = f"step {walk.at + 1} of {len(walk.events)}" + (" (the end)" if walk.done else "") if walk.events else ""
    out = R.transcript_html(t, status)
    if cur is not None:
        out = out.replace(f'data-step="{cur}" style="', f'data-step="{cur}" style="outline:2px solid #7c3aed;', -1)
    return out
