"""Browser rendering of step events for the demo (pure functions, no gradio, no torch).

Contract: the engine decides every token's fate; this module only styles it.
- ``piece_span(piece)`` is one ``<span class="sd-tok sd-KIND" data-kind=KIND data-info=...>`` per
  token, coloured by kind through ``kind_css()`` (accepted green, rejected red and struck through,
  recovered orange, bonus blue, plain neutral); ``data-info`` gives the step, the draft position
  and p and q where known (the page's inspector shows it on click, tap or Enter). The model's
  end-of-text token (``Transcript.eos_ids``, from ``end_ids(backend)``) is drawn as ``END_MARK``
  in its fate's colour, with a title that explains it.
- ``Transcript`` accumulates a run's events; ``transcript_html`` renders it, ``stats_summary`` /
  ``stats_html`` the live numbers, and ``alpha_frame`` the running acceptance rate (the other
  plot frames are in ``demo_stats``).
- ``api_payload(transcript)`` is the JSON value of the ``/generate`` endpoint:
  ``{"pieces": [...], "text", "tokens", "stats", "step", "stop", "done"}``.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from specdec.core.events import Piece, Stats, StepEvent
from specdec.demo import wording as W

# kind -> style of its tokens: the page's stylesheet (kind_css) and the legend's inline styles.
KIND_STYLE: dict[str, str] = {
    "accepted": "background:#c8f7c5;color:#14532d",
    "rejected": "background:#fde2e2;color:#b91c1c;text-decoration:line-through",
    "recovered": "background:#ffe0b2;color:#9a3412",
    "bonus": "background:#cfe3ff;color:#1e3a8a",
    "plain": "color:inherit",
}
KIND_HELP: dict[str, str] = {
    "accepted": "draft token the target kept",
    "rejected": "draft token the target refused (not in the output)",
    "recovered": "sampled from the residual max(p - q, 0) after a rejection",
    "bonus": "extra token from p after every draft token passed",
    "plain": "ordinary decoding step (nothing drafted)",
}
SPAN_BASE = "border-radius:2px"
END_MARK = "\u220e"  # the end-of-text token, which has no text of its own
END_HELP = "end of text: the model chose to stop here (its end-of-text / end-of-turn token, no text of its own)"
BOX_STYLE = (
    "font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;line-height:1.55;"
    "white-space:pre-wrap;word-break:break-word;padding:8px;border:1px solid #d0d7de;"
    "border-radius:6px;min-height:4em;max-height:min(520px,50vh);overflow:auto;"
    "display:flex;flex-direction:column-reverse"  # scrolled to the newest tokens, however often re-rendered
)


def num(x: float | None, fmt: str = ".3f") -> str:
    return "n/a" if x is None else format(x, fmt)


def piece_tooltip(piece: Piece, greedy: bool = False, argmax: str | None = None) -> str:
    """The inspector's lines; at temperature 0 (``greedy``) p and q are said as the argmax rule."""
    where = f"draft position {piece.position}" if piece.position else "no draft (position 0)"
    parts = [f"{piece.kind}", f"step {piece.step}", where, f"token id {piece.token_id}"]
    pq = W.pq_text(piece.kind, piece.p, piece.q, greedy, argmax)
    return " | ".join(parts + ([pq] if pq else []))


def visible_text(piece: Piece) -> str:
    """A rejected token made only of whitespace would be invisible: show it as compact symbols
    (newline, a run of n spaces as a space mark and n, tab)."""
    if piece.kind != "rejected" or piece.text.strip():
        return piece.text
    out, spaces = [], 0
    for ch in piece.text + "\0":
        if ch == " ":
            spaces += 1
            continue
        if spaces:
            out.append("\u2423" if spaces == 1 else f"\u2423{spaces}")
            spaces = 0
        out.append({"\n": "\u23ce", "\t": "\u21e5", "\0": ""}.get(ch, ch))
    return "".join(out) or "\u2205"


def piece_span(piece: Piece, greedy: bool = False, argmax: str | None = None, end: bool = False) -> str:
    """Small on purpose (a 512-token run re-renders ~500 of them a few times a second): colours come
    from the page's stylesheet (``kind_css``, class ``sd-KIND``), ``data-info`` feeds the inspector
    of specdec/demo/page.py, and ``tabindex`` makes the token reachable by keyboard. ``end``: the
    token is the model's end of text (or end of turn), drawn as ``END_MARK`` with a title saying so
    (it has no text of its own, so it would be invisible)."""
    info = piece_tooltip(piece, greedy, argmax)
    if end:
        info = f"{END_HELP} | {info}"
        return (
            f'<span class="sd-tok sd-{piece.kind} sd-end" data-kind="{piece.kind}" data-step="{piece.step}" '
            f'data-end="true" tabindex="0" title="{html.escape(END_HELP)}" data-info="{html.escape(info)}">'
            f"{END_MARK}</span>"
        )
    return (
        f'<span class="sd-tok sd-{piece.kind}" data-kind="{piece.kind}" data-step="{piece.step}" tabindex="0" '
        f'data-info="{html.escape(info)}">{html.escape(visible_text(piece))}</span>'
    )


def end_ids(backend) -> frozenset[int]:
    """The token ids that end a generation on this backend's model (the engine's ``eos_ids``;
    empty where the backend runs elsewhere and does not say)."""
    return frozenset(getattr(getattr(backend, "engine", None), "eos_ids", None) or ())


def kind_css() -> str:
    """The stylesheet rules for the token spans, from KIND_STYLE (one source for page and legend)."""
    return "".join(f".sd-tok.sd-{k}{{{v}}}\n" for k, v in KIND_STYLE.items())


def legend_html() -> str:
    """The five fates, then every symbol the stream draws besides text (wording.SYMBOLS)."""
    items = [
        f'<span class="sd-legend" style="{SPAN_BASE};{KIND_STYLE[k]}" title="{KIND_HELP[k]}">{k}</span>'
        f'<span style="opacity:.7;font-size:12px"> {KIND_HELP[k]}</span>'
        for k in ("accepted", "rejected", "recovered", "bonus", "plain")
    ]
    symbols = [
        f'<span class="sd-symbol" style="font-size:12px"><code>{html.escape(sym)}</code>'
        f'<span style="opacity:.7"> {html.escape(meaning)}</span></span>'
        for sym, meaning in W.SYMBOLS
    ]
    row = '<div class="sd-legend-row" style="display:flex;flex-wrap:wrap;gap:{}px;margin:2px 0">'
    return row.format(14) + "".join(items) + "</div>" + row.format(12) + "".join(symbols) + "</div>"


def step_argmax(pieces: Iterable[Piece]) -> dict[int, str]:
    """Draft position -> text of the token the step emitted there: at temperature 0 that is the
    target's argmax, the token a rejected draft token at that position was not."""
    return {pc.position: pc.text for pc in pieces if pc.emitted}


@dataclass
class StepRecord:
    step: int
    drafted: int
    accepted: int
    emitted: int
    rejected: int = 0  # tested and refused (struck in the stream); the rest of the draft was untested
    timings_ms: dict[str, float] = field(default_factory=dict)  # this step's propose, score, verify


@dataclass
class Transcript:
    """Everything a run has shown so far: pieces in order, one record per step, the last stats."""

    prompt: str = ""
    pieces: list[Piece] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    stats: Stats | None = None
    stop: str | None = None
    timings_ms: dict[str, float] = field(default_factory=lambda: {"propose": 0.0, "score": 0.0, "verify": 0.0})
    batch_rows: int | None = None  # requests that shared the last step's forward (a batching backend)
    greedy: bool = False  # temperature 0: p and q are said as the argmax rule (wording.pq_text)
    eos_ids: frozenset[int] = frozenset()  # the model's end-of-text ids (end_ids): drawn as END_MARK
    _spans: list[str] = field(default_factory=list, repr=False, compare=False)  # piece_span of each piece

    def add(self, event: StepEvent) -> None:
        self.pieces.extend(event.pieces)
        argmax = step_argmax(event.pieces) if self.greedy else {}
        self._spans.extend(
            piece_span(pc, self.greedy, argmax.get(pc.position), pc.token_id in self.eos_ids) for pc in event.pieces
        )
        self.steps.append(
            StepRecord(
                event.step,
                event.draft_size,
                sum(pc.kind == "accepted" for pc in event.pieces),
                len(event.emitted),
                sum(pc.kind == "rejected" for pc in event.pieces),
                dict(event.timings_ms),
            )
        )
        self.stats = event.stats
        self.stop = event.stop
        rows = (getattr(event, "batch", None) or {}).get("rows")
        if rows:
            self.batch_rows = int(rows)
        for name, ms in event.timings_ms.items():
            self.timings_ms[name] = self.timings_ms.get(name, 0.0) + ms

    def extend(self, events: Iterable[StepEvent]) -> Transcript:
        for ev in events:
            self.add(ev)
        return self

    def spans(self) -> str:
        """Every piece's ``piece_span`` in order, rendered once per piece (as it arrived)."""
        if len(self._spans) != len(self.pieces):  # pieces set by hand, not through add()
            self._spans = [piece_span(pc, self.greedy, None, pc.token_id in self.eos_ids) for pc in self.pieces]
        return "".join(self._spans)

    @property
    def text(self) -> str:
        return "".join(pc.text for pc in self.pieces if pc.emitted)

    @property
    def token_ids(self) -> list[int]:
        return [pc.token_id for pc in self.pieces if pc.emitted]

    @property
    def kinds(self) -> set[str]:
        return {pc.kind for pc in self.pieces}


def prompt_tail(prompt: str, lines: int = 4) -> str:
    """The last few lines of the prompt: enough context to read the continuation."""
    parts = prompt.split("\n")
    return prompt if len(parts) <= lines else "\u2026\n" + "\n".join(parts[-lines:])


def transcript_html(t: Transcript, status: str = "") -> str:
    prompt = (
        f'<span class="sd-prompt" style="opacity:.55">{html.escape(prompt_tail(t.prompt))}</span>' if t.prompt else ""
    )
    body = t.spans()
    if t.batch_rows:
        status = f"{status} · {batch_note(t.batch_rows)}" if status else batch_note(t.batch_rows)
    note = (
        f'<div class="sd-status" style="font-size:12px;opacity:.75;margin-top:4px">{html.escape(status)}</div>'
        if status
        else ""
    )
    return f'<div class="sd-stream" style="{BOX_STYLE}"><div>{prompt}{body}</div></div>{note}'


def batch_note(rows: int) -> str:
    """What a batching backend did with this run's last step (docs/batching.md)."""
    others = rows - 1
    if others <= 0:
        return "alone in the batch"
    return f"sharing the batch: {rows} requests in one target forward ({others} other user{'s' if others > 1 else ''})"


def stats_summary(stats: Stats | None) -> dict[str, str]:
    """The live numbers, formatted: label -> value."""
    if stats is None:
        return {"tokens/s": "-", "tau": "-", "alpha": "-", "target forwards": "-", "steps": "-", "tokens": "-"}
    return {
        "tokens/s": num(stats.tokens_per_s, ".1f"),
        "tau": num(stats.tau, ".2f"),
        "alpha": num(stats.alpha, ".2f"),
        "target forwards": str(stats.target_forwards),
        "steps": str(stats.steps),
        "tokens": str(stats.emitted),
    }


STAT_HELP = {
    "tokens/s": "emitted tokens per second of engine time (prefill included)",
    "tau": "tokens emitted per target forward (the baseline has 1.0)",
    "alpha": "accepted draft tokens / drafted tokens",
    "target forwards": "target model forward passes (one per step)",
    "steps": "speculative steps",
    "tokens": "tokens emitted",
}


STEADY_HELP = (
    "median rate of the run's windows of steps (tokens / engine step time, warm-up and prefill left out); "
    "in brackets the middle half of the windows"
)


def stats_html(stats: Stats | None, speed: str | None = None, spread: str = "") -> str:
    """The cards; ``speed`` replaces the whole-run tokens/s (the steady rate, speed.py), ``spread``
    is written small under it."""
    values = stats_summary(stats) | ({"tokens/s": speed} if speed else {})
    sub = f'<div class="sd-spread" style="font-size:11px;opacity:.75">{html.escape(spread)}</div>' if spread else ""
    cards = "".join(
        f'<div class="sd-stat" data-stat="{k}" title="{STEADY_HELP if k == "tokens/s" and speed else STAT_HELP[k]}" '
        f'style="border:1px solid #d0d7de;border-radius:6px;padding:4px 10px;min-width:84px">'
        f'<div style="font-size:11px;opacity:.7">{k}</div><div style="font-size:20px;font-weight:600">{v}</div>'
        f"{sub if k == 'tokens/s' else ''}</div>"
        for k, v in values.items()
    )
    return f'<div class="sd-stats" style="display:flex;flex-wrap:wrap;gap:8px">{cards}</div>'


def alpha_frame(t: Transcript) -> pd.DataFrame:
    """Running acceptance rate after each step (steps before the first draft are left out)."""
    rows, drafted, accepted = [], 0, 0
    for s in t.steps:
        drafted += s.drafted
        accepted += s.accepted
        if drafted:
            rows.append({"step": s.step, "alpha": accepted / drafted, "series": "alpha"})
    return pd.DataFrame(rows, columns=["step", "alpha", "series"])


def api_payload(t: Transcript, done: bool) -> dict[str, Any]:
    return {
        "pieces": [pc.to_dict() for pc in t.pieces],
        "text": t.text,
        "tokens": t.token_ids,
        "stats": t.stats.to_dict() if t.stats is not None else {},
        "step": t.steps[-1].step if t.steps else 0,
        "stop": t.stop,
        "done": done,
        "batch_rows": t.batch_rows,
    }


def cost_ratio(t: Transcript) -> float | None:
    """c estimated from the timings: draft ms per drafted token / target ms per scoring forward."""
    drafted = sum(s.drafted for s in t.steps)
    if not drafted or not t.steps or t.timings_ms.get("score", 0.0) <= 0:
        return None
    return (t.timings_ms["propose"] / drafted) / (t.timings_ms["score"] / len(t.steps))
