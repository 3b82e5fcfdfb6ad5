"""Lower-precision weights for the proposers' linears, used only where measurement says they pay.

Why: on a CPU whose last-level cache is smaller than the target's weights, every target step
evicts the proposer's weights, so a proposer's decoding forward reads them cold from memory and
its cost is about bytes read (docs/bench.md has the step profile). Half the bytes (float16) or a
quarter (int8) make that read cheaper; fbgemm's kernels keep the activations in float32 (float16
weights are converted in the kernel; int8 quantizes the activations per call), so no activation
range is lost. Whether a precision pays depends on the machine, so ``specdec/fast/calibrate_lowp.py``
times each proposer's decoding step in every precision right after a target step (the loop's own
cold state) and keeps the fastest; float32 unless another wins by the margin.

Exactness never depends on this module: only proposers use it (the target verifies in float32), the
draft model's q is computed from the very logits it samples from (``proposers/draft.py``), and
Medusa's and EAGLE's drafts are deterministic (q = None).

Contract:
- ``PRECISIONS = ("fp32", "fp16", "int8")``, most precise first; ``precisions(weight)`` those
  available for a weight here (fp32 always; the others need a float32 CPU weight and fbgemm).
- ``set_precision(linear, precision, keep=False)`` gives one ``packed.Linear`` a low-precision
  copy of its weight (``packed.Linear.low``; "fp32" removes it): its calls then run that copy at
  every row count. The fp32 weight is kept, so switching back is exact; ``keep`` keeps the copies
  of other precisions made before (calibration switches back and forth), else they are dropped.
- ``set_all(obj, precision)`` does it for every ``packed.Linear`` reachable from ``obj`` (the
  proposer's own linears; never pass the target's).
"""

from __future__ import annotations

import warnings

import torch

from specdec.models import packed as P

PRECISIONS = ("fp32", "fp16", "int8")


def _fbgemm() -> bool:
    engines = torch.backends.quantized.supported_engines
    return any(e in engines for e in ("fbgemm", "x86")) and hasattr(torch.ops.quantized, "linear_dynamic_fp16")


def precisions(weight: torch.Tensor) -> tuple[str, ...]:
    if weight.device.type != "cpu" or weight.dtype != torch.float32 or not _fbgemm():
        return ("fp32",)
    return PRECISIONS


def _rows2d(op, x: torch.Tensor, *args) -> torch.Tensor:
    """fbgemm's ops take [rows, in]: a vector or a batch of matrices goes through as rows."""
    if x.dim() == 2:
        return op(x, *args)
    y = op(x.reshape(-1, x.shape[-1]), *args)
    return y.reshape(*x.shape[:-1], y.shape[-1])


class _FP16:
    """fbgemm's float16-weight linear: float32 in and out, weights packed at half the bytes."""

    def __init__(self, w: torch.Tensor, b: torch.Tensor | None) -> None:
        self.packed = torch.ops.quantized.linear_prepack_fp16(w.contiguous(), b)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return _rows2d(torch.ops.quantized.linear_dynamic_fp16, x, self.packed)


class _INT8:
    """fbgemm's dynamic int8 linear: weights int8 per output channel, activations quantized per call."""

    def __init__(self, w: torch.Tensor, b: torch.Tensor | None) -> None:
        scale = (w.abs().amax(dim=1).double() / 127.0).clamp_min(1e-12)
        zero = torch.zeros(w.shape[0], dtype=torch.long)
        with warnings.catch_warnings():  # torch warns that quantized tensor types are deprecated
            warnings.simplefilter("ignore")
            q = torch.quantize_per_channel(w.contiguous(), scale, zero, 0, torch.qint8)
            self.packed = torch.ops.quantized.linear_prepack(q, b)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return _rows2d(torch.ops.quantized.linear_dynamic, x, self.packed, True)


_KINDS = {"fp16": _FP16, "int8": _INT8}


def set_precision(linear: P.Linear, precision: str, keep: bool = False) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    lows = getattr(linear, "lows", {})
    if precision != "fp32" and precision in precisions(linear.weight) and precision not in lows:
        with torch.inference_mode():
            lows[precision] = _KINDS[precision](linear.weight, linear.bias)
    linear.low = lows.get(precision)
    linear.lows = lows if keep else {k: v for k, v in lows.items() if k == precision}


def linears_in(obj, depth: int = 8) -> list[P.Linear]:
    """Every ``packed.Linear`` reachable from ``obj`` through attributes, lists, tuples, dicts."""
    seen: dict[int, P.Linear] = {}

    def walk(o, d):
        if isinstance(o, P.Linear):
            seen.setdefault(id(o), o)
            return
        if d <= 0 or isinstance(o, (torch.Tensor, torch.nn.Module, str, bytes, int, float)):
            return
        items = o.values() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else None
        for item in items if items is not None else getattr(o, "__dict__", {}).values():
            walk(item, d - 1)

    walk(obj, depth)
    return list(seen.values())


def set_all(obj, precision: str, keep: bool = False) -> int:
    linears = linears_in(obj)
    for lin in linears:
        set_precision(lin, precision, keep)
    return len(linears)
