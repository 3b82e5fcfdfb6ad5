"""Writing a tool's results: one place for the ``--json`` file every measuring tool offers.

Contract: ``write_results(res, path)`` writes ``res`` as indented JSON at ``path`` (its folder
made) when a path is given, and does nothing for ``None``. Why: the benches, profiles and trials
all end the same way; one function keeps their files alike (docs/results/ is read by doc scripts).
"""

from __future__ import annotations

import json
from pathlib import Path


def write_results(res: dict, path: str | Path | None) -> None:
    """The results as JSON at ``path`` (its folder made), if a path is given (``--json``)."""
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res, indent=1), encoding="utf-8")
