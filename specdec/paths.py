"""Where the checkout's files are: the shipped models and prompts, the docs and their results.

Contract: no torch, no I/O at import (``specdec --help`` reads it). ``ROOT`` is the checkout this
package runs from (``pip install -e .``, as the README installs it); ``SPECDEC_ASSETS`` points
``ASSETS`` elsewhere (e.g. for an installed copy of the package).
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSETS = Path(os.environ.get("SPECDEC_ASSETS", ROOT / "assets"))
DEFAULT_TARGET = ASSETS / "target"
DEFAULT_DRAFT = ASSETS / "draft"
DEFAULT_PROMPTS = ASSETS / "prompts" / "code.jsonl"
DOCS = ROOT / "docs"
RESULTS = DOCS / "results"


def cache_dir() -> Path:
    """Where specdec keeps what it builds or fetches: calibrations, models, vLLM's venv.
    ``$SPECDEC_CACHE``, else ``$XDG_CACHE_HOME/specdec``, else ``~/.cache/specdec``."""
    if os.environ.get("SPECDEC_CACHE"):
        return Path(os.environ["SPECDEC_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "specdec"
