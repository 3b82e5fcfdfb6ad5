"""Where the checkout's files are: the shipped models and prompts, the docs and their results.

Contract: no torch, no I/O at import (``specdec --help`` reads it). ``ROOT`` is the checkout this
package runs from (``pip install -e .``, as the README installs it); ``SPECDEC_ASSETS`` points
``ASSETS`` elsewhere (e.g. for an installed copy of the package). ``KeyedCache`` is the one
keyed JSON cache file format (calibration's timings, the language server's measured model).
"""

from __future__ import annotations

import hashlib
import json
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


class KeyedCache:
    """One JSON file per key under ``cache_dir()``, ``<prefix>-<digest of the key>.json``, holding
    ``{key_name: key, value_name: value}``. ``read`` returns the value only when the stored key equals
    the one asked for (a digest collision or a changed field misses); ``write`` replaces the file
    atomically and returns its path, or None where the cache cannot be written (measure again)."""

    def __init__(self, prefix: str, key_name: str = "key", value_name: str = "value") -> None:
        self.prefix, self.key_name, self.value_name = prefix, key_name, value_name

    def path(self, key: dict) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        return cache_dir() / f"{self.prefix}-{digest}.json"

    def read(self, key: dict):
        try:
            data = json.loads(self.path(key).read_text())
        except (OSError, ValueError):
            return None
        return data.get(self.value_name) if isinstance(data, dict) and data.get(self.key_name) == key else None

    def write(self, key: dict, value) -> Path | None:
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({self.key_name: key, self.value_name: value}, indent=1) + "\n")
            tmp.replace(path)
        except OSError:
            return None
        return path
