"""Building llama.cpp's ``llama-server`` once, from the package registry's sources, cached.

Contract: ``server_binary()`` returns a runnable ``llama-server``: ``$SPECDEC_LLAMACPP`` when set
(any build of it, used as is), else the cached build under ``root()/<VERSION>/<cpu>/`` (``root()``
is ``$SPECDEC_LLAMACPP_ROOT``, else ``cache_dir()/llama.cpp``), building it first when it is not
there (``ensure_built``). The sources are the sdist of ``llama-cpp-python==VERSION``, which vendors
llama.cpp under ``vendor/llama.cpp``; pip fetches it (``pip download --no-binary llama-cpp-python``)
from the same registry the project installs from. Each stage lands in a ``.partial`` path and is
renamed when complete, so an interrupted build resumes where it stopped (cmake's build folder is
kept until the binary is in place) and a half-built folder is never taken for a build.
``BuildError`` names what is missing (cmake, a C++ compiler, pip's download).

Why built here: llama.cpp is not in Debian 12 and the registry has no wheel with the server binary.
Why ``GGML_NATIVE`` and a per-CPU folder: llama.cpp is fastest built for the machine it runs on, and
such a binary may not run on another CPU (a shared cache, CI runners): the folder is keyed by the
CPU's feature flags and the build flags, so another CPU gets its own build instead of an illegal
instruction. Why not AMX: ggml's AMX backend segfaulted here (``NO_AMX`` says where). Static
libraries, so the binary can move out of the build folder. Only ``llama-server`` is built.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from specdec import env
from specdec.paths import cache_dir

VERSION = "0.3.36"
PACKAGE = "llama-cpp-python"
TARGETS = ("llama-server",)
BASE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=ON",
)
# ggml's AMX path (compiled in by -march=native on a CPU with AMX) crashed llama-server with SIGSEGV
# in its first evaluation on SmolLM2's Q4_1 here (docs/bench.md, "llama.cpp on AMX CPUs"); explicit
# -mno-* flags win over -march=native in GCC and clang whatever their order, so the rest of the
# native build (AVX-512, VNNI, BF16) stays.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def cmake_flags(machine: str | None = None) -> tuple[str, ...]:
    """The configure flags for this machine: ``BASE_FLAGS``, and AMX off on x86-64."""
    if (machine or platform.machine()) in ("x86_64", "AMD64"):
        return (*BASE_FLAGS, f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}")
    return BASE_FLAGS


class BuildError(RuntimeError):
    """llama.cpp could not be built (a tool is missing, a step failed)."""


def _say(msg: str) -> None:
    print(f"[llama.cpp] {msg}", file=sys.stderr, flush=True)


def cpu_tag() -> str:
    """The machine's architecture and a short hash of its CPU feature flags."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    except OSError:
        pass
    return f"{platform.machine()}-{hashlib.sha256(flags.encode()).hexdigest()[:10]}"


def root() -> Path:
    """``$SPECDEC_LLAMACPP_ROOT``, else ``cache_dir()/llama.cpp`` (the test suite keeps a fresh cache
    but this build, as it keeps the installed models)."""
    where = env.get("SPECDEC_LLAMACPP_ROOT")
    return Path(where) if where else cache_dir() / "llama.cpp"


def version_dir() -> Path:
    return root() / VERSION


def install_dir() -> Path:
    """Per CPU and per build flags: a build with other flags (an older cache's) is never reused."""
    flags = hashlib.sha256(" ".join(cmake_flags()).encode()).hexdigest()[:6]
    return version_dir() / f"{cpu_tag()}-{flags}"


def cached_binary() -> Path | None:
    exe = install_dir() / "bin" / "llama-server"
    return exe if exe.is_file() and os.access(exe, os.X_OK) else None


def server_binary(build: bool = True) -> Path:
    """``$SPECDEC_LLAMACPP``, else the cached build (built now when missing and ``build``)."""
    given = env.get("SPECDEC_LLAMACPP")
    if given:
        exe = Path(given)
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            raise BuildError(f"SPECDEC_LLAMACPP={given} is not an executable llama-server")
        _say(f"llama-server from $SPECDEC_LLAMACPP: {exe}")
        return exe
    exe = cached_binary()
    if exe is not None:
        _say(f"llama-server cached: {exe}")
        return exe
    if not build:
        raise BuildError(f"no llama-server built under {install_dir()}: run `specdec llamacpp build`")
    return ensure_built()


def missing_tools() -> list[str]:
    """The build tools this machine lacks, by name."""
    missing = [] if shutil.which("cmake") else ["cmake"]
    cxx = env.get("CXX")
    if not (shutil.which(cxx) if cxx else any(shutil.which(c) for c in ("c++", "g++", "clang++"))):
        missing.append(f"a C++ compiler ({cxx or 'c++, g++ or clang++'})")
    return missing


def _run(argv: list[str], cwd: Path | None = None, log: Path | None = None) -> None:
    _say("$ " + " ".join(argv))
    if log is None:
        rc = subprocess.call(argv, cwd=cwd)
    else:
        with log.open("ab") as f:
            rc = subprocess.call(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log else ""
        raise BuildError(f"{argv[0]} exited with status {rc}" + (f" (log {log}):\n{tail}" if log else ""))


def fetch_sdist() -> Path:
    """The sdist's tarball, downloaded once into the version folder."""
    vdir = version_dir()
    name = f"{PACKAGE.replace('-', '_')}-{VERSION}.tar.gz"
    tarball = vdir / name
    if tarball.is_file():
        _say(f"sources cached: {tarball}")
        return tarball
    part = vdir / "sdist.partial"
    part.mkdir(parents=True, exist_ok=True)
    _say(f"downloading the sources: {PACKAGE}=={VERSION} (sdist, about 77 MB)")
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", PACKAGE]
    _run(pip + ["-d", str(part), f"{PACKAGE}=={VERSION}"])
    got = part / name
    if not got.is_file():
        raise BuildError(f"pip download left no {name} in {part}")
    got.rename(tarball)
    shutil.rmtree(part, ignore_errors=True)
    return tarball


def extract_sources(tarball: Path) -> Path:
    """``vendor/llama.cpp`` of the sdist, extracted once into ``src/``."""
    src = version_dir() / "src"
    if (src / "CMakeLists.txt").is_file():
        return src
    part = version_dir() / "src.partial"
    shutil.rmtree(part, ignore_errors=True)
    _say(f"extracting vendor/llama.cpp from {tarball.name}")
    with tarfile.open(tarball) as tf:
        top = tf.getmembers()[0].name.split("/")[0]
        prefix = f"{top}/vendor/llama.cpp/"
        members = [m for m in tf.getmembers() if m.name.startswith(prefix)]
        for m in members:
            m.name = m.name[len(prefix) :]
        tf.extractall(part, members=[m for m in members if m.name], filter="data")
    if not (part / "CMakeLists.txt").is_file():
        raise BuildError(f"{tarball} has no vendor/llama.cpp/CMakeLists.txt")
    part.rename(src)
    return src


def compile_server(src: Path, jobs: int = 2) -> Path:
    """Configure and build ``llama-server`` in ``build-<cpu>.partial`` (kept between tries)."""
    build = version_dir() / f"build-{install_dir().name}.partial"
    build.mkdir(parents=True, exist_ok=True)
    log = build / "build.log"
    if not (build / "CMakeCache.txt").is_file():
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        _run(["cmake", "-S", str(src), "-B", str(build), *gen, *cmake_flags()], log=log)
    _say(f"compiling {' '.join(TARGETS)} with {jobs} jobs (about 15 minutes on 2 cores; log {log})")
    _run(["cmake", "--build", str(build), "-j", str(jobs), "--target", *TARGETS], log=log)
    return build


def ensure_built(jobs: int | None = None) -> Path:
    """Build llama-server into the cache unless it is there; return its path."""
    exe = cached_binary()
    if exe is not None:
        _say(f"llama-server cached: {exe}")
        return exe
    missing = missing_tools()
    if missing:
        raise BuildError(f"building llama.cpp needs {' and '.join(missing)}: not found on PATH")
    t0 = time.monotonic()
    _say(f"building llama.cpp ({PACKAGE} {VERSION}) into {install_dir()}")
    src = extract_sources(fetch_sdist())
    build = compile_server(src, jobs or min(2, os.cpu_count() or 1))
    final = install_dir()
    part = final.with_name(final.name + ".partial")
    shutil.rmtree(part, ignore_errors=True)
    (part / "bin").mkdir(parents=True)
    for target in TARGETS:
        shutil.copy2(build / "bin" / target, part / "bin" / target)
    stamp = {"package": PACKAGE, "version": VERSION, "cmake": list(cmake_flags()), "cpu": cpu_tag()}
    stamp["build_s"] = round(time.monotonic() - t0, 1)
    (part / "build.json").write_text(json.dumps(stamp, indent=1) + "\n")
    part.rename(final)
    shutil.rmtree(build, ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)  # the tarball stays: another CPU re-extracts it
    _say(f"built in {stamp['build_s']:.0f} s: {final / 'bin' / 'llama-server'}")
    return final / "bin" / "llama-server"
