"""The text after the cursor: where a completion stops, and the characters the editor already has.

Contract (pure, no pygls, no torch):
- ``rest_of_line(after)`` is the text after the cursor up to the end of its line.
- ``merge(text, rest)`` -> ``(insert, replace)``: what to insert at the cursor and how many
  characters after it the insertion replaces, so that the buffer never holds a character twice.
  With nothing but blanks after the cursor, the completion is unchanged (``replace`` 0). With text
  after the cursor (an auto-paired ``)``, a closing quote, the rest of a line), the completion is
  one line (a newline in the middle of a line would split it), and then:
  1. if it ends with what the line already has (``print(|)`` completed as ``"hi")``), that tail is
     dropped: insert ``"hi"``, the editor's ``)`` stays;
  2. else if the line's rest appears in it in order (type-over, as an editor's auto-pairs do:
     ``open(pa|):`` completed as ``th) as f:``), the completion replaces the rest of the line;
  3. else it stops before its first closing bracket that closes nothing it opened (that bracket
     belongs to the line's rest), and trailing blanks are dropped.
  The result of every case, put in the buffer, never repeats the editor's text: tested.
"""

from __future__ import annotations

OPEN, CLOSE = "([{", ")]}"


def rest_of_line(after: str) -> str:
    nl = after.find("\n")
    line = after if nl < 0 else after[:nl]
    return line[:-1] if line.endswith("\r") else line


def _type_over(tail: str, body: str) -> bool:
    """Whether ``tail``'s characters (blanks aside) appear in ``body`` in order, each closing
    bracket of ``tail`` matched by one of ``body`` that closes nothing ``body`` opened."""
    need = [ch for ch in tail if not ch.isspace()]
    j, depth = 0, 0
    for ch in body:
        if j < len(need) and ch == need[j] and (ch not in CLOSE or depth == 0):
            j += 1
            continue
        if ch in OPEN:
            depth += 1
        elif ch in CLOSE:
            if depth == 0:
                return False  # it would close an outer bracket the line's rest does not close here
            depth -= 1
    return j == len(need)


def _before_unmatched_closer(text: str) -> str:
    depth = 0
    for i, ch in enumerate(text):
        if ch in OPEN:
            depth += 1
        elif ch in CLOSE:
            depth -= 1
            if depth < 0:
                return text[:i]
    return text


def merge(text: str, rest: str, type_over: bool = True) -> tuple[str, int]:
    """(text to insert at the cursor, characters after the cursor it replaces); without
    ``type_over`` (a client that ignores an edit's range) case 2 is skipped."""
    if not rest.strip():
        return text, 0
    line = text.split("\n", 1)[0]
    tail = rest.rstrip()
    body = line.rstrip()
    own = _before_unmatched_closer(body)
    start = len(body) - len(tail)
    if body.endswith(tail) and (start == len(own) or not any(ch in CLOSE for ch in tail)):
        return body[:start], 0
    if type_over and body and _type_over(tail, body):
        return body, len(tail)
    return own.rstrip(), 0
