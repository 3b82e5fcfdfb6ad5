"""The shipped prompt set: prompts cut from held-out files (never trained on), deterministic.

Contract: ``make_prompts(files, n, ...)`` picks every m-th held-out file (sorted by key), takes a
window of about ``chars`` characters that starts at a line start and ends just after the first word
of a line (its indentation and first word included: where a user's cursor stands after typing the
line's first word), and returns JSON-ready records ``{"prompt", "source", "offset"}``; ``write_jsonl`` writes one per
line. Files too short or without a usable cut are skipped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from specdec.training.corpus import SourceFile, read_text

# Blank lines, indentation, then the first word (or one symbol) of the next non-blank line.
_NEXT_WORD = re.compile(r"[ \t\n]*(\w+|\S)")


def cut_prompt(text: str, chars: int) -> tuple[str, int] | None:
    """A window of about ``chars`` characters starting at a line start and ending after the first
    word of a line, taken from the middle of the file (where code, not the licence header, lives).

    Why not at a line end: the byte-level BPE merges a newline with the next line's indentation
    into one token, so a prompt ending in a bare newline shows the model a boundary it never saw in
    training (it then starts the next line at column 0); ending after a word is a boundary the
    tokenizer also makes inside the training text."""
    if len(text) < 2 * chars:
        return None
    end = text.find("\n", len(text) // 2)
    if end < 0:
        return None
    word = _NEXT_WORD.match(text, end + 1)
    if word is None:
        return None
    end = word.end()
    start = text.find("\n", max(0, end - chars)) + 1
    prompt = text[start:end]
    if len(prompt.strip()) < chars // 4:
        return None
    return prompt, start


def make_prompts(files: list[SourceFile], n: int = 40, chars: int = 900) -> list[dict]:
    usable: list[dict] = []
    for f in sorted(files, key=lambda f: f.key):
        text = read_text(f)
        cut = cut_prompt(text, chars) if text else None
        if cut:
            usable.append({"prompt": cut[0], "source": f.key, "offset": cut[1]})
    if len(usable) <= n:
        return usable
    step = len(usable) / n
    return [usable[int(i * step)] for i in range(n)]


def write_jsonl(records: list[dict], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
