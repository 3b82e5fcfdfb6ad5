"""Weight formats for the target's lean forward: fp32, bf16, int8 and int4 linears on the CPU.

Why: decoding one token reads every weight once, so on a CPU its step costs about the bytes it
reads over the memory bandwidth. The real models arrive as GGUF files whose weights are 4-bit
blocks (SmolLM2: Q4_1, a scale and a minimum per 32 weights; its embedding Q8_0); run in float32
after dequantizing, a step reads 5.5x the bytes llama.cpp reads. torch's CPU kernel for
group-wise int4 (``_weight_int4pack_mm_for_cpu``: a scale and a zero point per group of input
columns; its fast path takes bfloat16 activations, scales and zero points) carries both forms:
Q4_1's ``w = d q + m`` (q in 0..15) is its group form, re-packed from min and max per group; Q8_0's
``w = d q`` (q in -127..127) runs as two int4 passes (``_weight_int8pack_mm``, one scale per output
row, measured 20x slower than float32 here). The only change to a GGUF's weights is the bfloat16
rounding of each block's scale and zero point. Which format is fastest depends on the machine, so
``specdec/fast/calibrate_weights.py`` times them; the weight error each has is measured
(``error``), never assumed.

Why these kernels and not oneDNN's float32 or bfloat16 linear: the verifier's k-row forward must
give each row exactly what the one-row plain step gives (docs/memwall.md), and on the machines
measured here the int4 kernel computes every output row by the same loop whatever the
row count (``row_invariant`` checks that on the running machine), while MKL/oneDNN's float32 and
bfloat16 GEMMs choose their blocking by the row count, so the rounding of a row can change.

Contract:
- ``FORMATS``: "fp32" (the weight as is), "bf16", "int8" (symmetric, Q8_0's form) and "int4"
  (asymmetric, Q4_1's form), both per ``GROUP`` input columns of each output row, and "q4_1" (the
  same blocks through the native integer kernel, ``blocks.py``); ``HEAD`` the LM head's format
  beside a layers' format ("q8_0" beside "q4_1": ``blocks.q8_0``, not offered for layers).
- ``QLinear`` (``quantize(w, fmt, bias=None)``): ``q(x)`` is ``x W^T + b`` in float32 for float32
  x [rows, in] (or [in]); ``q.fmt``, ``q.shape`` (out, in), ``q.nbytes`` (the bytes one call reads
  for its weight), ``q.error`` (max |W - W'| of the stored weight against ``w``, 0 for fp32).
- ``row_invariant(q, rows)``: whether every row of ``q(X[:rows])`` equals ``q`` of that row alone,
  bit for bit, on random X.
- ``Scaled(q, scale)``: ``q(x * scale)``, an RMSNorm weight kept apart from a quantized linear
  (folding it into the weight would break the GGUF's blocks).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specdec.models import blocks

FORMATS = ("fp32", "bf16", "int8", "int4", "q4_1")
HEAD = {"int4": "int8", "q4_1": "q8_0"}  # the LM head's format beside the layers' (SmolLM2's is Q8_0)
GROUP = 32  # Q4_1's block: the int4 kernel's group along the input columns


def _int4_ok() -> bool:
    return hasattr(torch, "_weight_int4pack_mm_for_cpu") and hasattr(torch, "_convert_weight_to_int4pack_for_cpu")


def available(fmt: str, w: torch.Tensor) -> bool:
    """Whether ``fmt`` runs here for a float32 CPU weight ``w`` [out, in]."""
    if w.device.type != "cpu" or fmt not in (*FORMATS, "q8_0"):
        return False
    if fmt in ("q4_1", "q8_0"):
        return blocks.available(w)
    if fmt == "int4":
        return _int4_ok() and w.shape[1] % GROUP == 0 and w.shape[0] % 16 == 0
    if fmt == "int8":
        return _int4_ok() and w.shape[1] % GROUP == 0 and w.shape[0] % 16 == 0
    return True


class QLinear:
    """One linear in one weight format (module docstring)."""

    def __init__(self, fmt: str, shape: tuple[int, int], run, nbytes: int, error: float, bias=None) -> None:
        self.fmt, self.shape, self._run, self.nbytes, self.error = fmt, shape, run, nbytes, error
        self.bias = bias

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2:
            return self(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], self.shape[0])
        y = self._run(x)
        return y if self.bias is None else y + self.bias


def _fp32(w: torch.Tensor) -> tuple:
    w = w.detach().float().contiguous()
    return (lambda x: F.linear(x, w)), w.numel() * 4, 0.0


def _bf16(w: torch.Tensor) -> tuple:
    wb = w.detach().to(torch.bfloat16).contiguous()
    err = float((wb.float() - w).abs().max())
    return (lambda x: F.linear(x.to(torch.bfloat16), wb).float()), wb.numel() * 2, err


def _pack4(q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor):
    """One int4 kernel call: q [n, k] in 0..15, scale and zero [n, k / GROUP]; w = (q - 8) scale + zero.
    Its fast path (measured: ~20x the generic one here) takes bfloat16 activations, scales and
    zero points, and 8 inner k-tiles."""
    n, k = q.shape
    packed = torch._convert_weight_to_int4pack_for_cpu(q.to(torch.int32).contiguous(), 8)
    sz = torch.stack([scale, zero], -1).to(torch.bfloat16).transpose(0, 1).contiguous()  # [k / GROUP, n, 2]
    nbytes = packed.numel() * packed.element_size() + sz.numel() * 2

    def run(x: torch.Tensor) -> torch.Tensor:
        return torch._weight_int4pack_mm_for_cpu(x.to(torch.bfloat16), packed, GROUP, sz).float()

    run.packed, run.sz = packed, sz  # the kernel's operands, for a scripted step (``scripted.py``)
    return run, nbytes


def _bf(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).float()


def _int8(w: torch.Tensor) -> tuple:
    """Q8_0's form: per group of GROUP input columns d = max |w| / 127, q = round(w / d) in
    -127..127. No fast int8 kernel here (``_weight_int8pack_mm`` measured 20x slower than float32),
    so q = 16 hi + lo runs as two int4 passes: hi + 8 with scale 16 d, lo with scale d and zero 8 d."""
    w = w.detach().float()
    n, k = w.shape
    g = w.reshape(n, k // GROUP, GROUP)
    d = (g.abs().amax(-1) / 127).clamp_min(1e-12)
    q = torch.round(g / d[..., None]).clamp(-127, 127)
    hi = torch.div(q, 16, rounding_mode="floor")
    lo = q - 16 * hi
    err = float((q * _bf(d)[..., None] - g).abs().max())
    run_hi, b_hi = _pack4((hi + 8).reshape(n, k), 16 * d, torch.zeros_like(d))
    run_lo, b_lo = _pack4(lo.reshape(n, k), d, 8 * d)

    def run(x: torch.Tensor) -> torch.Tensor:
        return run_hi(x) + run_lo(x)

    run.parts = (run_hi, run_lo)  # the two passes' operands, for a scripted step (``scripted.py``)
    return run, b_hi + b_lo, err


def _int4(w: torch.Tensor) -> tuple:
    """Q4_1's form: per group of GROUP input columns d = (max - min) / 15, q = round((w - min) / d);
    the kernel computes (q - 8) d + zero, so zero = min + 8 d."""
    w = w.detach().float()
    n, k = w.shape
    g = w.reshape(n, k // GROUP, GROUP)
    lo, hi = g.amin(-1), g.amax(-1)
    d = ((hi - lo) / 15).clamp_min(1e-12)
    q = torch.round((g - lo[..., None]) / d[..., None]).clamp(0, 15)
    err = float(((q - 8) * _bf(d)[..., None] + _bf(lo + 8 * d)[..., None] - g).abs().max())
    run, nbytes = _pack4(q.reshape(n, k), d, lo + 8 * d)
    return run, nbytes, err


_MAKERS = {"fp32": _fp32, "bf16": _bf16, "int8": _int8, "int4": _int4, "q4_1": blocks.q4_1, "q8_0": blocks.q8_0}


@torch.inference_mode()
def quantize(w: torch.Tensor, fmt: str, bias: torch.Tensor | None = None) -> QLinear:
    if not available(fmt, w):
        raise ValueError(f"weight format {fmt!r} is not available here for a {tuple(w.shape)} weight")
    run, nbytes, err = _MAKERS[fmt](w)
    b = None if bias is None else bias.detach().float()
    return QLinear(fmt, tuple(w.shape), run, nbytes, err, b)


class Scaled:
    """``q(x * scale)``: an RMSNorm weight applied to the activations, not folded into q."""

    def __init__(self, q: QLinear, scale: torch.Tensor) -> None:
        self.q, self.scale = q, scale.detach().float()
        self.shape, self.fmt, self.nbytes, self.error = q.shape, q.fmt, q.nbytes, q.error

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.q(x * self.scale)


@torch.inference_mode()
def row_invariant(q, rows: int = 9, seed: int = 0) -> bool:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, q.shape[1], generator=gen)
    for m in range(2, rows + 1):
        y = q(x[:m])
        if any(not torch.equal(q(x[i : i + 1])[0], y[i]) for i in range(m)):
            return False
    return True
