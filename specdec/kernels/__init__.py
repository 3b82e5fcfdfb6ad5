"""Native kernels, compiled on the running machine once and cached: ``rows.cpp`` (the row-exact
4-bit forward, ``specdec/models/native.py``), ``q4.cpp`` (Q4_1 and Q8_0 block linears as torch
operators, ``specdec/models/quant.py``'s "q4_1" format) over ``blocks.cpp`` and ``lanes.h``, the
torch-free core: one integer path per ISA (AVX-512 VNNI, AVX-VNNI, AVX2, NEON dotprod) and a
plain C++ reference, all giving identical bits (``selftest.py`` checks them, ARM under qemu).

Why compiled here and not shipped built: the loops are compiled for this CPU (``-march=native``),
against the torch that is installed, with the C++ compiler a Python install with headers already
has. Which path runs is the compiler's choice from its macros at that build, nothing at run time.
Nothing is fetched. The build takes about 20-60 s once; its result lives in ``root()/<hash>/``
(``$SPECDEC_KERNELS``, else ``<cache>/kernels``) keyed by the sources, torch's version, the
instruction set compiled (the compiler's predefined macros for ``march()``, on any OS and
architecture) and the flags, so a changed source, torch, CPU or flag builds again. Where
there is no compiler or the build fails, ``native()`` is None with the reason in ``why_not()``,
and the engine keeps its TorchScript and eager forwards (each exact against its own plain
decoding; only speed and rounding differ).

Contract:
- ``native()``: ``torch.ops.specdec_native`` once built and loaded (building it if needed, with a
  line on stderr), None where it cannot be; ``$SPECDEC_NATIVE=0`` turns it off.
- ``why_not()``: why ``native()`` is None ("" when it is not); ``key()``: the library's cache key.
- ``path()``: the integer path the library runs ("avx512vnni", "avxvnni", "avx2", "neon-dotprod",
  "reference"), "" where there is no library. ``planned_path()``: the path a build for ``march()``
  takes, read from the compiler's macros without building (for ``specdec models``; the same
  rule as blocks.cpp's ``#if`` chain, tests/test_kernels.py checks they agree).
- ``root()``: where built libraries live.
- ``march()``: the ``-march`` the library is compiled for: ``$SPECDEC_KERNELS_MARCH``, else "native".
  Another value (e.g. "x86-64-v3": AVX2, no AVX-512) builds the paths another CPU would take, so
  they are tested here too (tests/test_native.py); part of the library's cache key.
- ``build(force=False) -> Path``: compile (or find) the shared library; raises ``RuntimeError``
  with the compiler's message on failure.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from specdec import env
from specdec.paths import cache_dir

SOURCES = [Path(__file__).with_name(n) for n in ("rows.cpp", "q4.cpp", "blocks.cpp", "q4.h", "blocks.h", "lanes.h")]
_why = ""


@functools.cache
def _isa() -> str:
    """The instruction set the compiler targets for ``march()``: its predefined macros (``__AVX2__``,
    ``__ARM_FEATURE_DOTPROD``, ...), the same on x86 and ARM, Linux and macOS. Keying the cache on
    what is compiled, not on /proc/cpuinfo's x86 ``flags`` line, keeps two CPUs that share a cache
    folder from loading each other's build."""
    cxx = _cxx()
    try:
        done = subprocess.run(
            [cxx, f"-march={march()}", "-dM", "-E", "-x", "c++", os.devnull], capture_output=True, text=True, timeout=60
        )
        return done.stdout if done.returncode == 0 else f"{march()} {done.stderr[-200:]}"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{march()} {os.uname().machine} {exc}"


def _cxx() -> str:
    return env.get("CXX") or "g++"


def root() -> Path:
    """``$SPECDEC_KERNELS``, else ``<cache>/kernels``: where built libraries live (apart from the
    other caches, as models are, so a test suite's fresh cache does not rebuild them)."""
    return Path(env.get("SPECDEC_KERNELS")) if env.get("SPECDEC_KERNELS") else cache_dir() / "kernels"


def march() -> str:
    return env.get("SPECDEC_KERNELS_MARCH") or "native"


def _flags() -> list[str]:
    """-fopenmp, not only -fopenmp-simd: ATen's ``at::parallel_for`` is an inline OpenMP region in
    torch's CPU builds, compiled into this library; without OpenMP it runs serially, and a second
    thread did nothing for the block linears (docs/memwall.md, "Threads"). The runtime is torch's
    own libgomp (same soname, already loaded), so torch.set_num_threads governs both."""
    return ["-O3", f"-march={march()}", "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC", "-std=c++20", "-w"]


def _library() -> Path:
    parts = [*(p.read_text() for p in SOURCES), torch.__version__, _isa(), sys.platform, *_flags()]
    key = "|".join(parts)
    return root() / hashlib.sha256(key.encode()).hexdigest()[:16] / "libspecdec_native.so"


def _command(out: Path) -> list[str]:
    from torch.utils.cpp_extension import include_paths

    lib = Path(torch.__file__).parent / "lib"
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return [
        _cxx(),
        *_flags(),
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        *[f"-I{p}" for p in include_paths()],
        *(str(p) for p in SOURCES if p.suffix == ".cpp"),
        "-o",
        str(out),
        f"-L{lib}",
        "-lc10",
        "-ltorch_cpu",
        f"-Wl,-rpath,{lib}",
    ]


def build(force: bool = False) -> Path:
    out = _library()
    if out.exists() and not force:
        return out
    cxx = _cxx()
    if shutil.which(cxx) is None:
        raise RuntimeError(f"no C++ compiler ({cxx}) on PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    print("specdec: compiling the native 4-bit kernels for this CPU (once, about 30 s)...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        part = Path(tmp) / out.name
        done = subprocess.run(_command(part), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"compiling the native kernels failed:\n{done.stderr[-3000:]}")
        os.replace(part, out)  # atomic: a concurrent build leaves one whole library
    return out


@functools.cache
def native():
    global _why
    if not env.on("SPECDEC_NATIVE"):
        _why = "turned off by SPECDEC_NATIVE=0"
        return None
    if not hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu"):
        _why = "this torch has no int4 CPU kernel"
        return None
    try:
        torch.ops.load_library(str(build()))
        return torch.ops.specdec_native
    except Exception as exc:  # noqa: BLE001 - any failure means the TorchScript and eager paths
        _why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"specdec: native forward unavailable ({_why}); using the TorchScript path", file=sys.stderr)
        return None


def why_not() -> str:
    return _why


def planned_path() -> str:
    macros = set(re.findall(r"#define (\w+)", _isa()))
    if {"__AVX512VNNI__", "__AVX512BW__"} <= macros:
        return "avx512vnni"
    if {"__AVX2__", "__FMA__", "__F16C__"} <= macros:
        return "avxvnni" if "__AVXVNNI__" in macros else "avx2"
    if {"__ARM_FEATURE_DOTPROD", "__aarch64__"} <= macros:
        return "neon-dotprod"
    return "reference"


def path() -> str:
    ops = native()
    return str(ops.path()) if ops is not None else ""


def key() -> str:
    """The built library's cache key ("" where there is none): calibrations timed on one build are
    not taken for another (specdec/fast/calibrate.py keys on it)."""
    return _library().parent.name if native() is not None else ""
