"""The kernels' integer and float paths on every ISA, bit for bit (specdec/kernels/selftest.py).

The claims tested: each build of the torch-free core (this CPU's native path, AVX-VNNI, AVX2, the
x86 reference, ARM NEON dotprod and the ARM reference under qemu) equals the plain C++ reference
bit for bit and is row-exact (row t of a T-row call is a one-row call), and all builds print the
same hash of their outputs, so their transcripts are the same; and on real SmolLM2 layers the torch
operator's ISA path gives exactly its reference path's floats. The cross-compiler and qemu come
from scripts/system-deps.sh (the README's test command), so a missing one is a failure in CI.
"""

from __future__ import annotations

import os

import pytest
import torch

from specdec.kernels import native, path, planned_path
from specdec.kernels import selftest as st
from specdec.models import blocks


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = {}
    for target in st.TARGETS:
        why = st.usable(target)
        out[target.name] = why or st.run(target, tmp_path_factory.mktemp(target.name))
    return out


@pytest.mark.parametrize("name", [t.name for t in st.TARGETS])
def test_every_path_is_the_reference_bit_for_bit(results, name):
    r = results[name]
    if isinstance(r, str):
        if os.environ.get("CI") and "lacks" not in r:  # a missing tool, not a missing CPU feature
            pytest.fail(f"{name}: {r}")
        pytest.skip(f"{name}: {r}")
    assert r.checks > 400 and r.failures == 0
    native_hash = results["native"].hash
    assert r.hash == native_hash, f"{name} ({r.path}) computed other bits than this CPU's build"


def test_the_builds_take_the_paths_they_name(results):
    names = {n: r.path for n, r in results.items() if not isinstance(r, str)}
    assert names.get("avx2", "avx2") == "avx2" and names.get("avxvnni", "avxvnni") == "avxvnni"
    assert names.get("reference-x86", "reference") == "reference"
    assert names.get("neon-dotprod", "neon-dotprod") == "neon-dotprod"
    assert names.get("reference-arm", "reference") == "reference"
    assert native() is not None and path() == names["native"]  # the torch library runs the same path
    assert planned_path() == path()  # what `specdec models` says without building


@pytest.mark.slow
def test_real_smollm2_layers_give_the_reference_floats():
    from tests.smol_helpers import smol_engine

    smol = smol_engine(draft=False)
    layer = smol.target.model.get_decoder().layers[3]
    gen = torch.Generator().manual_seed(0)
    for w in (layer.self_attn.q_proj.weight, layer.mlp.down_proj.weight, layer.mlp.gate_proj.weight):
        for maker, op in ((blocks.q4_1, "q4_linear"), (blocks.q8_0, "q8_linear")):
            run, _, _ = maker(w)
            x = torch.randn(7, w.shape[1], generator=gen)
            fast = run(x)
            ref = getattr(native(), op)(x, *run.operands, True)
            assert torch.equal(fast, ref), f"{op} on a real {tuple(w.shape)} weight differs from its reference"
            assert all(torch.equal(run(x[i : i + 1])[0], fast[i]) for i in range(7))
