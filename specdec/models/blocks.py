"""GGUF's own block formats run by the native kernels (``specdec/kernels/q4.cpp``): "q4_1" layers
and a "q8_0" LM head, with activations quantized to int8 per block of 32, as llama.cpp does.

Why: torch's int4 kernel (``quant.py``'s "int4") converts activations to bfloat16 and costs about k
plain steps to verify k tokens on CPUs without bfloat16 dot products; integer dot products reuse
each unpacked weight block for every row, so a k-row forward costs little more than one. The
weights are the GGUF's blocks: Q4_1's nibbles with its scale d and minimum m in float16 (the
GGUF's own storage type), Q8_0's bytes with d in float16. What changes against torch's kernels is
the activations' rounding to int8 per block (measured as weight error here, as agreement with the
float model in experiments/int4_precision.py).

Contract:
- ``available(w)``: the native library built (on any CPU: its integer path is chosen at build,
  ``kernels.path()``) and w [out, in] has in % 32 == 0 and out % 16 == 0.
- ``q4_1(w)`` and ``q8_0(w)``: ``(run, nbytes, error)`` as ``quant.py``'s makers give; ``run(x)`` is
  float32 ``x W'^T`` for x [rows, in]; ``run.operands`` the kernel's tensors (``models/native.py``).
"""

from __future__ import annotations

import torch

from specdec.kernels import native

BLOCK = 32
TILE = 16  # output rows per register (q4.cpp)


def available(w: torch.Tensor) -> bool:
    ops = native()
    return ops is not None and w.dim() == 2 and w.shape[1] % BLOCK == 0 and w.shape[0] % TILE == 0


def _tiles(q: torch.Tensor) -> torch.Tensor:
    """[N, G, 32] -> [N/16, G, 8, 64]: per tile, block and quad, value o * 4 + i = output o, column 4c + i."""
    n, G, _ = q.shape
    return q.reshape(n // TILE, TILE, G, 8, 4).permute(0, 2, 3, 1, 4).reshape(n // TILE, G, 8, 64)


def _per_tile(v: torch.Tensor) -> torch.Tensor:
    """[N, G] -> [N/16, G, 16]."""
    n, G = v.shape
    return v.reshape(n // TILE, TILE, G).transpose(1, 2).contiguous()


def q4_1(w: torch.Tensor) -> tuple:
    """Per block of 32 input columns m = min, d = (max - min) / 15 (both float16),
    q = round((w - m) / d) in 0..15, laid out in tiles of 16 outputs (q4.cpp)."""
    w = w.detach().float()
    n, k = w.shape
    g = w.reshape(n, k // BLOCK, BLOCK)
    lo, hi = g.amin(-1), g.amax(-1)
    d = ((hi - lo) / 15).clamp_min(1e-6).half()
    m = lo.half()
    q = torch.round((g - m.float()[..., None]) / d.float()[..., None]).clamp(0, 15).to(torch.uint8)
    err = float((q.float() * d.float()[..., None] + m.float()[..., None] - g).abs().max())
    e = _tiles(q)
    qs = (e[..., :32] | (e[..., 32:] << 4)).contiguous()
    dt, mt = _per_tile(d), _per_tile(m)
    ops = native()

    def run(x: torch.Tensor) -> torch.Tensor:
        return ops.q4_linear(x, qs, dt, mt)

    run.operands = [qs, dt, mt]
    return run, qs.numel() + 4 * d.numel(), err


def q8_0(w: torch.Tensor) -> tuple:
    """Per block of 32 input columns d = max |w| / 127 (float16), q = round(w / d) in -127..127,
    stored as q + 128 (the kernel's unsigned operand)."""
    w = w.detach().float()
    n, k = w.shape
    g = w.reshape(n, k // BLOCK, BLOCK)
    d = (g.abs().amax(-1) / 127).clamp_min(1e-6).half()
    q = torch.round(g / d.float()[..., None]).clamp(-127, 127)
    err = float((q * d.float()[..., None] - g).abs().max())
    qs = _tiles((q + 128).to(torch.uint8)).contiguous()
    dt = _per_tile(d)
    ops = native()

    def run(x: torch.Tensor) -> torch.Tensor:
        return ops.q8_linear(x, qs, dt)

    run.operands = [qs, dt]
    return run, qs.numel() + 2 * d.numel(), err
