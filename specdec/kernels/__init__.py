"""Native kernels, compiled on the running machine once and cached: ``rows.cpp`` (the row-exact
int4 forward, ``specdec/models/native.py``) and ``q4.cpp`` (Q4_1 and Q8_0 block linears with
integer dot products, ``specdec/models/quant.py``'s "q4_1" format).

Why compiled here and not shipped built: the loops are compiled for this CPU (``-march=native``:
AVX-512 where it exists), against the torch that is installed, with the C++ compiler a Python
install with headers already has. Nothing is fetched. The build takes about 20-40 s once; its
result lives in ``root()/<hash>/`` (``$SPECDEC_KERNELS``, else ``<cache>/kernels``) keyed by the
sources, torch's version, the CPU and the compiler flags, so a changed source, torch, machine or
flag builds again. Where
there is no compiler or the build fails, ``native()`` is None with the reason in ``why_not()``,
and the engine keeps its TorchScript and eager forwards (each exact against its own plain
decoding; only speed and rounding differ).

Contract:
- ``native()``: ``torch.ops.specdec_native`` once built and loaded (building it if needed, with a
  line on stderr), None where it cannot be; ``$SPECDEC_NATIVE=0`` turns it off.
- ``why_not()``: why ``native()`` is None ("" when it is not); ``key()``: the library's cache key.
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
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from specdec.paths import cache_dir

SOURCES = [Path(__file__).with_name(n) for n in ("rows.cpp", "q4.cpp", "q4.h")]
_why = ""


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return os.uname().machine


def root() -> Path:
    """``$SPECDEC_KERNELS``, else ``<cache>/kernels``: where built libraries live (apart from the
    other caches, as models are, so a test suite's fresh cache does not rebuild them)."""
    return Path(os.environ["SPECDEC_KERNELS"]) if os.environ.get("SPECDEC_KERNELS") else cache_dir() / "kernels"


def march() -> str:
    return os.environ.get("SPECDEC_KERNELS_MARCH") or "native"


def _flags() -> list[str]:
    """-fopenmp, not only -fopenmp-simd: ATen's ``at::parallel_for`` is an inline OpenMP region in
    torch's CPU builds, compiled into this library; without OpenMP it runs serially, and a second
    thread did nothing for the block linears (docs/memwall.md, "Threads"). The runtime is torch's
    own libgomp (same soname, already loaded), so torch.set_num_threads governs both."""
    return ["-O3", f"-march={march()}", "-fopenmp", "-shared", "-fPIC", "-std=c++20", "-w"]


def _library() -> Path:
    parts = [*(p.read_text() for p in SOURCES), torch.__version__, _cpu_flags(), sys.platform, *_flags()]
    key = "|".join(parts)
    return root() / hashlib.sha256(key.encode()).hexdigest()[:16] / "libspecdec_native.so"


def _command(out: Path) -> list[str]:
    from torch.utils.cpp_extension import include_paths

    lib = Path(torch.__file__).parent / "lib"
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return [
        os.environ.get("CXX", "g++"),
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
    cxx = os.environ.get("CXX", "g++")
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
    if os.environ.get("SPECDEC_NATIVE", "1") == "0":
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


def key() -> str:
    """The built library's cache key ("" where there is none): calibrations timed on one build are
    not taken for another (specdec/fast/calibrate.py keys on it)."""
    return _library().parent.name if native() is not None else ""
