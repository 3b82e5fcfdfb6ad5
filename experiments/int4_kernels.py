"""The linear kernels on SmolLM2's shapes at 1 and 5 rows (issue 31): what a step's linears cost.

Why: the plain step reads every weight once and the verifier's forward of k + 1 rows reads them
once too; whether verifying costs about one step depends on how each kernel's cost grows with the
rows. This times float32 ``F.linear``, the int4 and int8 formats of ``specdec/models/quant.py`` and
oneDNN's int8 x int8 GEMM behind ``torch._int_mm`` (random operands, no scales: the kernel alone)
on the shapes of SmolLM2's layers and LM head, median of 5 x N calls.

Usage: ``python -m experiments.int4_kernels`` (prints a table; quoted in docs/log/memwall.md).
Not part of the engine.
"""

from __future__ import annotations

import time

import torch

from specdec.models import quant as Q

SHAPES = {"qkv": (960, 576), "o": (576, 576), "gate_up": (3072, 576), "down": (576, 1536), "head": (49152, 576)}


def _median_us(fn, args: tuple, n: int) -> float:
    for _ in range(10):
        fn(*args)
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        runs.append((time.perf_counter() - t0) / n)
    return sorted(runs)[2] * 1e6


def main() -> None:
    torch.set_num_threads(2)
    print(f"{'weight':<8}{'rows':>5}" + "".join(f"{f:>10}" for f in (*Q.FORMATS, "_int_mm")) + "  (us per call)")
    for name, (n, k) in SHAPES.items():
        w = torch.randn(n, k) * 0.02
        qs = [Q.quantize(w, f) for f in Q.FORMATS]
        wi = torch.randint(-127, 127, (k, n), dtype=torch.int8)
        calls = 50 if name == "head" else 200
        for rows in (1, 5):
            x = torch.randn(rows, k)
            cells = [_median_us(q, (x,), calls) for q in qs]
            xi = torch.randint(-127, 127, (rows, k), dtype=torch.int8)
            cells.append(_median_us(torch._int_mm, (xi, wi), calls))
            print(f"{name:<8}{rows:>5}" + "".join(f"{c:>10.0f}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
