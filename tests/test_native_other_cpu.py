"""The native kernels as another CPU would build them: x86-64-v3 (AVX2, FMA, F16C; no AVX-512, no
VNNI) and x86-64 (the plain C++ reference), through torch, on the real model.

Why: the kernels are compiled with ``-march=native``, so CI on one CPU runs one path of the torch
library. ``$SPECDEC_KERNELS_MARCH`` builds the library for another target into its own cache folder,
and a child process (the library loads once per process) runs SmolLM2's greedy transcript on q4_1
weights through it: every build must offer q4_1 (every CPU has a path), name the path it runs, and
give exactly the transcript this CPU's own build gives (tests/test_kernels.py checks the same on
random blocks, ARM included, without torch).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys
from specdec.kernels import path
from specdec.bench.transcripts import greedy_transcripts
out = greedy_transcripts("smollm2-135m", "q4_1", prompts=3, tokens=16)
print("RESULT " + json.dumps({"path": path(), "tokens": out}))
"""


def _child(march: str, tmp_path: Path) -> dict:
    env = {**os.environ, "SPECDEC_KERNELS_MARCH": march, "SPECDEC_KERNELS": str(tmp_path / march)}
    if march == "native":
        env.pop("SPECDEC_KERNELS_MARCH")
        env["SPECDEC_KERNELS"] = os.environ.get("SPECDEC_KERNELS", str(tmp_path / march))
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert r.returncode == 0 and line, r.stderr[-3000:]
    return json.loads(line[len("RESULT ") :])


@pytest.fixture(scope="module")
def here(tmp_path_factory) -> dict:
    return _child("native", tmp_path_factory.mktemp("native"))


@pytest.mark.slow
@pytest.mark.parametrize("march,expect", [("x86-64-v3", "avx2"), ("x86-64", "reference")])
def test_another_cpus_build_gives_this_cpus_transcript(tmp_path, here, march, expect):
    if platform.machine() != "x86_64":
        pytest.skip(f"-march={march} is an x86-64 target; this machine is {platform.machine()}")
    other = _child(march, tmp_path)
    assert other["path"] == expect
    assert other["tokens"] == here["tokens"]
    assert sum(len(t) for t in here["tokens"]) >= 3 * 12
