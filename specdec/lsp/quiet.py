"""Quiet when unsure: a completion that is degenerate repetition, or that the model itself gave
low probability, is not shown.

Contract (pure):
- ``repetitive(text, limit)`` is True when some unit of 1-16 characters (not only blanks) occurs
  ``limit`` or more times in a row in ``text`` and that run covers at least half of its
  non-blank characters (``" = ' + ' + ' + '"``, ``"TWSP TWSP TWSP"``); ``limit`` 0 is off.
  Indentation-only repeats (four spaces) and short runs like ``xxx`` inside a longer line are kept.
- ``confidence(spans, n_chars)`` is the geometric mean of the target's probability of the tokens
  that make up the first ``n_chars`` characters of the continuation (``spans``: (start, length,
  logp) per emitted token, ``specdec/core/confidence.py``: the raw softmax, temperature 1, the same for
  every method), or None when no such token reports one (the healing step's tokens, which spell
  what the user typed, never count; nor do zero-length pieces).
- ``unsure(text, spans, min_confidence)`` is True when that confidence is below ``min_confidence``
  (0 is off; no figure: not unsure).
- ``EarlyJunk(limit)`` watches a completion while it is generated: called with the text so far, it
  is True once that text holds at least ``EARLY_SOLID`` non-blank characters and is already
  ``repetitive`` (checked again each time the count doubles, so a completion pays a few checks,
  not one per step). The language server then stops decoding and answers nothing, instead of
  running a loop to the token budget only to filter it (the line-mode tail in docs/lsp.md: 4 of 100
  completions, 360-450 ms each). The finished text could only have passed the filter if as much
  again diluted the run; what this costs in accepted characters is measured in docs/lsp.md.
Why both: the repetition rule catches the loops a small model falls into, which it can be quite
sure of token by token; the confidence rule catches the guesses (a rare identifier, a made-up
argument list) that a user would have to delete. docs/lsp.md measures what each removes on the
held-out typing replay and what it costs in accepted characters (``experiments/lsp_quiet.py``).
"""

from __future__ import annotations

import math

MAX_UNIT = 16
EARLY_SOLID = 24  # non-blank characters a completion in progress needs before it can be judged junk


def _solid(text: str) -> int:
    return len(text.replace(" ", "").replace("\n", "").replace("\t", ""))


def _run(text: str, start: int, n: int) -> int:
    """How many times text[start:start+n] repeats back to back from ``start``."""
    unit, count, i = text[start : start + n], 0, start
    while text.startswith(unit, i):
        count += 1
        i += n
    last = unit.rstrip()
    if last != unit and last and text.startswith(last, i):
        count += 1  # "TWSP TWSP TWSP": the last unit without its trailing blank
    return count


def repetitive(text: str, limit: int = 3) -> bool:
    if limit <= 0:
        return False
    solid = _solid(text)
    if solid == 0:
        return False
    for n in range(1, MAX_UNIT + 1):
        for start in range(0, max(0, len(text) - n * limit) + 1):
            unit = text[start : start + n]
            if not unit.strip():
                continue
            count = _run(text, start, n)
            if count >= limit:
                covered = _solid(unit * count)
                if 2 * covered >= solid:
                    return True
    return False


def confidence(spans, n_chars: int) -> float | None:
    lps = [lp for start, length, lp in spans if length > 0 and start < n_chars]
    return math.exp(sum(lps) / len(lps)) if lps else None


def unsure(text: str, spans, min_confidence: float) -> bool:
    if min_confidence <= 0:
        return False
    c = confidence(spans, len(text))
    return c is not None and c < min_confidence


class EarlyJunk:
    def __init__(self, limit: int) -> None:
        self.limit, self.next = limit, EARLY_SOLID

    def __call__(self, text: str) -> bool:
        if self.limit <= 0:
            return False
        n = _solid(text)
        if n < self.next:
            return False
        while self.next <= n:
            self.next *= 2
        return repetitive(text, self.limit)
