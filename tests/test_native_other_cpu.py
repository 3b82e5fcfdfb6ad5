"""The native kernels as another CPU would build them: x86-64-v3 (AVX2, FMA; no AVX-512, no VNNI).

Why: the kernels are compiled with ``-march=native``, so CI on one CPU tests only that CPU's paths:
on an AVX-512 VNNI machine the int8 block linears run and the fallback never does; on an older one
the reverse. ``$SPECDEC_KERNELS_MARCH`` builds the library for another target into its own cache
folder, and the exactness and kernel tests run on it in a child process (the library loads once per
process): the block formats ("q4_1") must be refused with the reason printed, and the int4 native
forward must pass the same bit-for-bit and tolerance tests it passes when built natively.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_kernels_built_without_avx512_refuse_the_block_formats_and_stay_exact(tmp_path):
    if platform.machine() != "x86_64":
        pytest.skip(f"-march=x86-64-v3 is an x86-64 target; this machine is {platform.machine()}")
    env = {**os.environ, "SPECDEC_KERNELS_MARCH": "x86-64-v3", "SPECDEC_KERNELS": str(tmp_path)}
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-m", "not slow", "-p", "no:cacheprovider"]
    r = subprocess.run(
        [*argv, "tests/test_quant.py", "tests/test_native.py"], env=env, cwd=ROOT, capture_output=True, text=True
    )
    print(r.stdout[-4000:], r.stderr[-2000:])
    assert r.returncode == 0
    assert "q4_1 is not offered" in r.stdout  # the block formats were refused, and said why
    assert " passed" in r.stdout and " failed" not in r.stdout
    built = list(tmp_path.glob("*/libspecdec_native.so"))
    assert len(built) == 1  # the other target's library, apart from the native one
