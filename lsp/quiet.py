"""Quiet when unsure: a completion that is degenerate repetition is not shown.

Contract (pure): ``repetitive(text, limit)`` is True when some unit of 1-16 characters (not only
blanks) occurs ``limit`` or more times in a row in ``text`` and that run covers at least half of
its non-blank characters (``" = ' + ' + ' + '"``, ``"TWSP TWSP TWSP"``); ``limit`` 0 is off.
Why a text rule and not a probability threshold: the backend's events report the target's
probability only for tested draft tokens, not for every emitted token, so a confidence
threshold would depend on the method; a repetition rule is the same for all of them and catches
the junk a small model produces when it is unsure (docs/lsp.md measures what it removes).
Indentation-only repeats (four spaces) and short runs like ``xxx`` inside a longer line are kept.
"""

from __future__ import annotations

MAX_UNIT = 16


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
    solid = len(text.replace(" ", "").replace("\n", "").replace("\t", ""))
    if solid == 0:
        return False
    for n in range(1, MAX_UNIT + 1):
        for start in range(0, max(0, len(text) - n * limit) + 1):
            unit = text[start : start + n]
            if not unit.strip():
                continue
            count = _run(text, start, n)
            if count >= limit:
                covered = len((unit * count).replace(" ", "").replace("\n", "").replace("\t", ""))
                if 2 * covered >= solid:
                    return True
    return False
