"""Words the demo shows beside the numbers (pure functions, no gradio, no torch).

Contract:
- ``C_WORDS``: what the cost ratio c is and what its size means, in words (About, Race, Teach).
- ``c_sentence(c)``: the Race's measured c in one sentence.
- ``plural(n, word)``: "1 token", "2 tokens".
- ``range_text(lo, hi)``: "8" when lo == hi, else "0 to 8".
- ``pq_text(kind, p, q, greedy, argmax)``: how a token's p and q read in the inspector. At
  temperature 0 p and q are one-hot (argmax rows, docs/architecture.md I5), so "p=0.000 q=1.000"
  would read as "impossible": there the rule is said instead ("rejected: the target's argmax is
  ' 3', not this token"; "accepted: the target's argmax"). ``argmax`` is the text of the token the
  target chose at that position, where the step shows it.
- ``SYMBOLS``: every symbol the token stream draws besides text, with its meaning (the legend's
  second row): how ``render.visible_text`` shows a rejected whitespace or empty token, and the
  ellipsis of a prompt whose earlier lines are hidden.
"""

from __future__ import annotations

import json
import re

SYMBOLS: tuple[tuple[str, str], ...] = (
    ("\u220e", "the end-of-text token (in its fate's colour)"),
    ("\u23ce", "a newline in a rejected token"),
    ("\u2423", "one space in a rejected token; \u24237 = seven spaces (indentation)"),
    ("\u21e5", "a tab in a rejected token"),
    ("\u2205", "a rejected token with no text of its own (a special token, e.g. end of text)"),
    ("\u2026", "earlier prompt lines, hidden (the last 4 are shown)"),
)


C_WORDS = (
    "**c, the cost ratio** (the Race's *measured c*, the Teach view's slider): the time to draft one token "
    "over the time of one target forward, measured in the run (the draft's milliseconds per drafted token / "
    "the verify forward's milliseconds per step). c = 0.1 means ten drafted tokens cost one target forward. "
    "At c = 1 a drafted token costs as much as the forward it might save: speculation at best breaks even "
    "(every token accepted); above 1 (e.g. a full-precision draft beside a 4-bit target, or a tree built "
    "token by token) it always loses, whatever the acceptance: plot it in Teach, whose slider goes to 3."
)


def c_sentence(c: float) -> str:
    """The Race's measured c, in words."""
    if c >= 1:
        verdict = "more than the forward it may save, so speculation cannot pay with this cost"
    elif c >= 0.5:
        verdict = "a large share of a forward: only a high acceptance pays"
    else:
        verdict = "a small share of a forward"
    return (
        f"Measured c ~ {c:.2f}: drafting one token took {c:.2f} times as long as one target forward, "
        f"{verdict} (About the models explains c; set it in Teach)."
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def range_text(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo} to {hi}"


def quoted(text: str) -> str:
    """A token's text in quotes with newlines and tabs escaped (as the inspector shows tokens)."""
    return json.dumps(text, ensure_ascii=False)


def greedy_rule(kind: str, argmax: str | None = None) -> str:
    """The temperature-0 reading of a token's fate: the argmax rule, no probabilities."""
    if kind == "accepted":
        return "accepted: the target's argmax (temperature 0 keeps a draft token only if it is)"
    if kind == "rejected":
        if argmax is None:
            return "rejected: not the target's argmax (temperature 0 keeps only the argmax)"
        return f"rejected: the target's argmax is {quoted(argmax)}, not this token"
    if kind in ("recovered", "bonus", "plain"):
        return f"{kind}: the target's argmax (temperature 0)"
    return kind


def pq_text(kind: str, p: float | None, q: float | None, greedy: bool, argmax: str | None = None) -> str | None:
    """The inspector's line about p and q, or None when the token has neither and is not greedy."""
    if greedy:
        return greedy_rule(kind, argmax)
    if p is None and q is None:
        return None
    return f"p={'n/a' if p is None else f'{p:.3f}'} q={'n/a' if q is None else f'{q:.3f}'}"


LIBRARIES = {"numpy": "numpy", "stdlib": "the standard library", "transformers": "transformers"}
_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?(def|class)[ \t]+(\w+)", re.M)


def _where(prompt: str) -> str:
    """What the continuation writes: a comment or code (a window may start inside a docstring, so
    counting quotes cannot tell a docstring)."""
    last = next((ln.strip() for ln in reversed(prompt.splitlines()) if ln.strip()), "")
    return "comment" if last.startswith("#") else "code"


def example_label(source: str, prompt: str, width: int = 34) -> str:
    """An example button's name from what the prompt shows, not its file: the function or class the
    prompt ends in, the library and whether it ends in a comment or code, e.g. "compress() in numpy
    (code)"; without a def or class, the prompt's last whole line."""
    lib = LIBRARIES.get(source.split("/")[0], source.split("/")[0] or "code")
    where = _where(prompt)
    found = _DEF.findall(prompt)
    if found:
        kind, name = found[-1]
        return f"{name}{'()' if kind == 'def' else ' class'} in {lib} ({where})"
    lines = prompt.splitlines() if prompt.endswith("\n") else prompt.splitlines()[:-1]  # not the cut line
    last = next((ln.strip() for ln in reversed(lines) if len(ln.strip()) >= 8), prompt.strip()[:width])
    short = last if len(last) <= width else last[: width - 1] + "\u2026"
    return f"{short} \u00b7 {lib} ({where})"
