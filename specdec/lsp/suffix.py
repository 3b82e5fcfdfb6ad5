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
  3. else it stops before its first closer that closes nothing it opened (that closer belongs to
     the line's rest), and trailing blanks are dropped.
  A closer is a closing bracket or, when the cursor is inside a string literal whose closing quote
  the line's rest already has (an auto-paired ``"|"``), that quote: ``open(p, "|")`` completed as
  ``w")`` inserts ``w``. Brackets inside a string the completion opens itself count for nothing.
  The result of every case, put in the buffer, never repeats the editor's text: tested.
- ``open_quote(line)`` is the quote (``"``, ``'``, or a triple quote) of the string literal left
  open at the end of ``line`` (the cursor's line before the cursor), or None: outside any string,
  or after a comment starts.
"""

from __future__ import annotations

OPEN, CLOSE = "([{", ")]}"
QUOTES = ('"""', "'''", '"', "'")  # longest first


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


def open_quote(line: str) -> str | None:
    """The quote of the string literal still open at the end of ``line``, or None."""
    i, quote = 0, None
    while i < len(line):
        if quote is None:
            if line[i] == "#":
                return None  # a comment: no string is open
            quote = _quote_at(line, i)
            i += len(quote) if quote else 1
        elif line[i] == "\\":
            i += 2
        elif line.startswith(quote, i):
            i, quote = i + len(quote), None
        else:
            i += 1
    return quote


def _quote_at(text: str, i: int) -> str | None:
    return next((q for q in QUOTES if text.startswith(q, i)), None)


def _before_unmatched_closer(text: str, quote: str | None = None, inside: str | None = None) -> str:
    """``text`` up to its first closer that closes nothing it opened: a closing bracket, or
    ``quote`` (the string the cursor is in) outside the brackets ``text`` opened. Brackets in a
    string literal are not counted: one ``text`` opens itself, or the one it starts ``inside`` (a
    string the cursor is in whose closing quote is ``text``'s own); a backslash escapes a character."""
    depth, inner, i = 0, inside, 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and (inner is not None or quote is not None):
            i += 2
            continue
        if inner is not None:
            i, inner = (i + len(inner), None) if text.startswith(inner, i) else (i + 1, inner)
            continue
        if quote is not None and depth == 0 and text.startswith(quote, i):
            return text[:i]
        q = _quote_at(text, i)
        if q is not None and (quote is None or depth > 0):
            inner, i = q, i + len(q)
            continue
        if ch in OPEN:
            depth += 1
        elif ch in CLOSE:
            depth -= 1
            if depth < 0:
                return text[:i]
        i += 1
    return text


def merge(text: str, rest: str, type_over: bool = True, before: str = "") -> tuple[str, int]:
    """(text to insert at the cursor, characters after the cursor it replaces); without
    ``type_over`` (a client that ignores an edit's range) case 2 is skipped. ``before`` is the
    cursor's line before the cursor (where a string literal may be open)."""
    if not rest.strip():
        return text, 0
    line = text.split("\n", 1)[0]
    tail = rest.rstrip()
    body = line.rstrip()
    opened = open_quote(before)
    quote = opened if opened is not None and opened in tail else None  # a closing quote the line's rest has
    own = _before_unmatched_closer(body, quote, None if quote else opened)
    start = len(body) - len(tail)
    closers = CLOSE + (quote or "")
    if body.endswith(tail) and (start == len(own) or not any(ch in closers for ch in tail)):
        return body[:start], 0
    if type_over and body and _type_over(tail, body):
        return body, len(tail)
    return own.rstrip(), 0
