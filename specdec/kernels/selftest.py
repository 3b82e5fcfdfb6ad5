"""Build and run the kernels' torch-free self-test (``selftest.cpp`` + ``blocks.cpp``) for this CPU,
for another x86 ``-march``, or for aarch64 under qemu.

Why: the native library is compiled for the CPU it runs on, so a test suite on one machine exercises
one path. The self-test links the core alone (no torch: there is no aarch64 torch to run under
qemu), checks the path it was compiled with against the plain C++ reference bit for bit (and row t of
a T-row call against a one-row call), and prints a hash of every output. The hash is the same for
every build whose outputs are the reference's, so equal hashes from an AVX-512, an AVX2 and an ARM
build prove that their transcripts agree.

Contract:
- ``Target(name, cxx, flags, runner)``: how to build and run one build; ``TARGETS`` the x86 ones
  (native, ``x86-64-v3 -mavxvnni``, ``x86-64-v3``: AVX2, ``x86-64``: the reference) and the aarch64
  ones (``armv8.2-a+dotprod`` under ``qemu-aarch64-static -cpu max``, ``armv8-a`` under ``-cpu
  cortex-a72``: no dotprod, the reference).
- ``usable(target)``: "" when its compiler and runner are on PATH (and, for x86 flags, the CPU can
  run the code), else why not.
- ``run(target, folder)`` -> ``Result(path, lanes, checks, failures, hash)``; raises RuntimeError with
  the compiler's or the program's output when building or running fails.
- ``python -m specdec.kernels.selftest`` runs every usable target and prints one line each.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
SOURCES = [HERE / "selftest.cpp", HERE / "blocks.cpp"]


@dataclass(frozen=True)
class Target:
    name: str
    cxx: str
    flags: tuple[str, ...]
    runner: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()  # x86 CPU flags (/proc/cpuinfo) the built code executes


@dataclass(frozen=True)
class Result:
    path: str
    lanes: str
    checks: int
    failures: int
    hash: str


_ARM = "aarch64-linux-gnu-g++"
_QEMU = "qemu-aarch64-static"
TARGETS = (
    Target("native", "g++", ("-march=native",)),
    Target("avxvnni", "g++", ("-march=x86-64-v3", "-mavxvnni"), needs=("avx2", "fma", "f16c", "avx_vnni")),
    Target("avx2", "g++", ("-march=x86-64-v3",), needs=("avx2", "fma", "f16c")),
    Target("reference-x86", "g++", ("-march=x86-64",)),
    Target("neon-dotprod", _ARM, ("-march=armv8.2-a+dotprod", "-static"), (_QEMU, "-cpu", "max")),
    Target("reference-arm", _ARM, ("-march=armv8-a", "-static"), (_QEMU, "-cpu", "cortex-a72")),
)


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith(("flags", "Features"))), "")
    return set(line.partition(":")[2].split())


def usable(target: Target) -> str:
    import platform

    if shutil.which(target.cxx) is None:
        return f"no {target.cxx} on PATH (scripts/system-deps.sh installs it)"
    if target.runner and shutil.which(target.runner[0]) is None:
        return f"no {target.runner[0]} on PATH (scripts/system-deps.sh installs it)"
    if target.cxx == "g++" and target.name != "native" and platform.machine() != "x86_64":
        return f"{target.name} is an x86-64 build; this machine is {platform.machine()}"
    missing = [f for f in target.needs if f not in _cpu_flags()]
    return f"this CPU lacks {', '.join(missing)}" if missing else ""


_LINE = re.compile(r"path=(\S+) lanes=(\S+) checks=(\d+) failures=(\d+) hash=([0-9a-f]+)")


def run(target: Target, folder: Path | None = None) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(folder or tmp) / f"selftest-{target.name}"
        cmd = [target.cxx, "-O2", "-std=c++20", "-ffp-contract=off", *target.flags, *map(str, SOURCES), "-o", str(exe)]
        built = subprocess.run(cmd, capture_output=True, text=True)
        if built.returncode != 0:
            raise RuntimeError(f"building the self-test ({' '.join(cmd)}) failed:\n{built.stderr[-3000:]}")
        done = subprocess.run([*target.runner, str(exe)], capture_output=True, text=True, timeout=600)
    found = _LINE.search(done.stdout)
    if found is None:
        why = f"exit {done.returncode}"
        raise RuntimeError(f"the {target.name} self-test printed no result ({why}):\n{done.stderr[-2000:]}")
    path, lanes, checks, failures, digest = found.groups()
    return Result(path, lanes, int(checks), int(failures), digest)


def main() -> int:
    bad = 0
    for target in TARGETS:
        why = usable(target)
        if why:
            print(f"{target.name:14s} skipped: {why}")
            continue
        r = run(target)
        bad += r.failures > 0
        print(f"{target.name:14s} path={r.path} lanes={r.lanes} checks={r.checks} failures={r.failures} hash={r.hash}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
