"""Corpus of Python source: a deterministic file list, a by-file train/held-out split, token arrays.

Contract:
- ``list_sources(roots)`` returns every ``*.py`` file under the given roots (tests, caches and
  vendored site-packages excluded for the standard library), sorted by their path relative to the
  root, so the same installation gives the same list on every machine.
- ``split_of(relpath)`` assigns a file to ``"train"`` or ``"heldout"`` from a hash of its relative
  path alone; held-out files are never trained on.
- ``encode_split(...)`` tokenizes a split into one ``uint16`` array with EOS between files and
  caches it as ``.npy`` next to a JSON manifest (file-list hash, token counts).
"""

from __future__ import annotations

import hashlib
import json
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HELDOUT_PERCENT = 4
SKIP_DIRS = {
    "__pycache__",
    "test",
    "tests",
    "idle_test",
    "site-packages",
    "lib2to3",
    "_vendor",
    "testing",
    "ensurepip",
    "turtledemo",
}
MAX_FILE_BYTES = 400_000


@dataclass(frozen=True)
class SourceFile:
    root_name: str
    relpath: str
    path: Path

    @property
    def key(self) -> str:
        return f"{self.root_name}/{self.relpath}"


def default_roots(packages: tuple[str, ...] = ("transformers", "tokenizers", "tqdm", "numpy")) -> dict[str, Path]:
    """The standard library plus the source trees of a few installed packages."""
    roots = {"stdlib": Path(sysconfig.get_paths()["stdlib"])}
    purelib = Path(sysconfig.get_paths()["purelib"])
    for name in packages:
        if (purelib / name).is_dir():
            roots[name] = purelib / name
    return roots


def list_sources(roots: dict[str, Path]) -> list[SourceFile]:
    files: list[SourceFile] = []
    for root_name, root in sorted(roots.items()):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
            for fn in sorted(filenames):
                if not fn.endswith(".py") or fn.startswith("test_"):
                    continue
                path = Path(dirpath) / fn
                try:
                    size = path.stat().st_size
                except OSError:
                    continue
                if 0 < size <= MAX_FILE_BYTES:
                    files.append(SourceFile(root_name, str(path.relative_to(root)), path))
    files.sort(key=lambda f: f.key)
    return files


def split_of(key: str) -> str:
    h = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16)
    return "heldout" if h % 100 < HELDOUT_PERCENT else "train"


def file_list_hash(files: list[SourceFile]) -> str:
    return hashlib.sha256("\n".join(f.key for f in files).encode()).hexdigest()[:16]


def read_text(f: SourceFile) -> str | None:
    try:
        return f.path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def encode_split(files: list[SourceFile], tokenizer, eos_id: int, out: Path) -> np.ndarray:
    """Tokenize ``files`` into one uint16 array (EOS after each file); cached at ``out``."""
    if out.exists():
        return np.load(out, mmap_mode="r")
    texts = [t for t in (read_text(f) for f in files) if t]
    ids: list[np.ndarray] = []
    batch = 256
    for i in range(0, len(texts), batch):
        for enc in tokenizer.encode_batch(texts[i : i + batch]):
            ids.append(np.asarray(enc.ids + [eos_id], dtype=np.uint16))
    arr = np.concatenate(ids) if ids else np.zeros(0, dtype=np.uint16)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.save(out, arr)
    return arr


def write_manifest(files: list[SourceFile], counts: dict[str, int], out: Path) -> dict:
    by_split: dict[str, int] = {}
    for f in files:
        s = split_of(f.key)
        by_split[s] = by_split.get(s, 0) + 1
    manifest = {
        "file_list_sha256_16": file_list_hash(files),
        "n_files": by_split,
        "n_tokens": counts,
        "heldout_percent": HELDOUT_PERCENT,
        "roots": sorted({f.root_name for f in files}),
    }
    out.write_text(json.dumps(manifest, indent=2))
    return manifest
