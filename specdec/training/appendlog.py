"""Append-only JSON-lines folders shared by the self-distillation steps (``magpie.py`` writes the
answers, ``features.py`` reads them, possibly while they are still being written).

Contract:
- ``read_lines(path, trim)``: the file's whole lines as dicts; a last line cut by a kill (no
  newline yet) is skipped, and dropped from the file when ``trim`` (only the writer may trim).
- ``lock_folder(folder, wait, busy)``: an open file holding an exclusive ``flock`` on
  ``folder/.lock``; closing it releases the lock (so does the process ending). Taken: returned at
  once. Held by another process: with ``wait``, print ``busy`` and block until it is free; without,
  ``SystemExit(busy)``.

Why one place: the data run refuses a second writer and the features pass waits for a second
pass, but both are the same lock and the same whole-line rule, and two copies would drift.
"""

from __future__ import annotations

import fcntl
import json
from pathlib import Path


def read_lines(path: Path, trim: bool = False) -> list[dict]:
    if not path.exists():
        return []
    text = path.read_text()
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        if trim:
            path.write_text(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def lock_folder(folder: Path, wait: bool, busy: str):
    f = (folder / ".lock").open("a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        if not wait:
            f.close()
            raise SystemExit(busy) from None
        print(busy)
        fcntl.flock(f, fcntl.LOCK_EX)
    return f
