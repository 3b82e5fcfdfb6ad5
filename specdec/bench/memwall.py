"""The memory wall in the bench: the bytes a plain step reads, the measured read bandwidth, and
the tokens/s that bound allows.

Why: one-token decoding reads every weight once, so bytes per step over the machine's read
bandwidth bounds plain decoding from above; how close a row comes to that bound says whether
its step is bound by memory (the regime speculative decoding is for) or by per-operation
overhead. The bandwidth is measured on the running machine, never assumed.

Contract:
- ``bandwidth_gbs(gib=1.0, threads=None)``: the best of a few ``torch.sum`` over a float32
  tensor of ``gib`` GiB (larger than any cache), in GB/s, with the engine's thread count.
- ``memwall(engine, none_tok_s)``: ``{"format", "kernel", "path", "forward", "scripted", "bytes_per_step",
  "bandwidth_gbs",
  "limit_tok_s", "none_share"}`` for the bench's JSON (``none_share``: the plain row's tokens/s
  over the limit; None without a plain row) plus the verify cost measured by the weight
  calibration (``specdec/fast/calibrate_weights.py``) when it ran: ``step_ms`` (the forward in use;
  ``script_step_ms``, ``eager_step_ms``: the same step on the others, ``forward`` names the one
  kept: "native", "script", "eager") and ``r``; ``path`` the kernels' integer path
  (``kernels.path()``: "avx512vnni", "avxvnni", "avx2", "neon-dotprod", "reference"; "" without them)
  ``{k: verify time of k + 1 rows over one row}``.
- ``describe(row) -> str``: the line the bench prints.
"""

from __future__ import annotations

import time

import torch

from specdec.fast.calibrate_weights import step_bytes
from specdec.kernels import path as kernels_path

KERNELS = {
    "fp32": "float32 linears (MKL/oneDNN, calibrated per shape)",
    "bf16": "bfloat16 linears (oneDNN)",
    "int8": "Q8_0-form int8 groups of 32 as two torch._weight_int4pack_mm_for_cpu passes",
    "int4": "Q4_1-form int4 groups of 32, torch._weight_int4pack_mm_for_cpu (bf16 activations), "
    "LM head int8; row-exact verifier",
    "q4_1": "GGUF Q4_1 blocks x int8 activations per block, integer dot products (specdec/kernels/blocks.cpp, "
    "path {path}), LM head Q8_0; row-exact verifier",
}
FORWARDS = {
    "native": "; layers as native loops (specdec/kernels/rows.cpp)",
    "script": "; layers in one TorchScript function",
    "eager": "",
}


def bandwidth_gbs(gib: float = 1.0, repeats: int = 3) -> float:
    x = torch.ones(int(gib * 2**30) // 4, dtype=torch.float32)
    best = float("inf")
    for _ in range(repeats + 1):  # the first touches the pages
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return x.numel() * 4 / best / 1e9


def memwall(engine, none_tok_s: float | None, timings: dict | None = None) -> dict:
    fmt = engine.target.weights
    nbytes = step_bytes(engine.target)
    bw = bandwidth_gbs()
    limit = bw * 1e9 / nbytes
    forward = engine.forward.rows  # the row-exact forward running ("" off a row-exact format)
    isa = kernels_path()
    row = {
        "format": fmt,
        "kernel": KERNELS.get(fmt, fmt).format(path=isa or "none") + FORWARDS.get(forward, ""),
        "path": isa,
        "forward": forward,
        "scripted": forward == "script",
        "bytes_per_step": nbytes,
        "bandwidth_gbs": round(bw, 2),
        "limit_tok_s": round(limit, 1),
        "none_share": None if none_tok_s is None else round(none_tok_s / limit, 3),
    }
    t = (timings or {}).get(fmt)
    if t:
        row["step_ms"] = round(t["step_us"] / 1000, 2)
        for name in ("script", "eager"):
            if f"{name}_step_us" in t:
                row[f"{name}_step_ms"] = round(t[f"{name}_step_us"] / 1000, 2)
        row["r"] = {k: round(v / t["step_us"], 2) for k, v in t["verify_us"].items()}
    return row


def describe(row: dict) -> str:
    share = "" if row["none_share"] is None else f"; plain decoding reached {100 * row['none_share']:.0f}% of it"
    r = row.get("r")
    rk = ", ".join(f"r({k}) {v}" for k, v in (r or {}).items())
    verify = f"; verify cost (k + 1 rows over one row): {rk}" if rk else ""
    return (
        f"weights: {row['format']} ({row['kernel']}); a plain step reads {row['bytes_per_step'] / 1e6:.0f} MB, "
        f"measured read bandwidth {row['bandwidth_gbs']:.1f} GB/s -> limit {row['limit_tok_s']:.0f} tok/s"
        f"{share}{verify}"
    )
