"""Which code computes the target's forward: one config object, one function that reads it.

Why: the choice used to be made in several places at once: ``Target.path`` ("hf" or "lean", set
by ``Target.use`` and reset by ``Target.set_weights``), ``Target.weights`` (the format), and
``LeanTarget.hidden``'s branches on its own ``native`` and ``script`` attributes, which
calibration (``fast/calibrate_weights.py``) rebound from outside to switch forwards and to time
them. Now the target holds one ``Forward`` (the engine reads it as ``Engine.forward``), every
change replaces it whole (``Target.use``, ``Target.use_rows``, ``Target.set_weights``), and
``kernel`` alone turns it and a call's shape into the code that runs.
Two process-wide switches stay outside it on purpose, because they say what exists on this
machine, not what one engine runs: the packed-linear plan (``packed.set_plan``: per weight shape
and row count, for every model in the process) and the environment's off switches
``SPECDEC_PACKED=0`` (``packed.available``) and ``SPECDEC_NATIVE=0`` (``kernels.native``), which
make a path unavailable before anything chooses.

Contract:
- ``Forward(path, weights, rows, whole)``: ``path`` "hf" (transformers' decoder) or "lean" (the
  fused layers, ``lean_target.py``); ``weights`` the format (``quant.FORMATS``; anything but "fp32"
  runs on the lean path only); ``rows`` the row-exact forward of a row-exact format ("native",
  "script" or "eager"), "" where there is none; ``whole`` True for a target (its rows forward
  decides every call it must, below), False for a 4-bit draft (``proposers/draft_quant.py``: the
  native loops for feeds of at most ``SHORT_ROWS`` tokens, the batched lean layers for longer ones;
  a draft needs no row-exactness, its q is what it sampled from).
- ``ROWS``: the row-exact forwards, fastest first by default: ``default_rows(available)`` is the
  first of ``available`` (what a fresh lean target built), "" for none.
- ``kernel(forward, tokens, exact, chain)`` -> "hf", "lean", "native", "script" or "eager": the
  code for a forward over ``tokens`` positions; ``exact`` for the verifier's forward, ``chain``
  when no tree mask is given. A row-exact format runs its rows forward on the verifier's call
  and on every one-token call (so each verifier row is bit for bit a plain step's row);
  TorchScript covers chains only, trees then run eagerly; prefill keeps the batched lean layers,
  except on "native", which runs every forward, prefill and the final norm included, so that a
  transcript is the kernels' arithmetic alone and the same on every CPU (kernels/lanes.h,
  kernels/blocks.h), not torch's, whose attention and norms round differently by ISA.
"""

from __future__ import annotations

from dataclasses import dataclass

ROWS = ("native", "script", "eager")  # row-exact forwards, the default order (fastest first)


SHORT_ROWS = 32  # a draft's longest feed on its rows forward; measured faster than lean up to 64 rows


@dataclass(frozen=True)
class Forward:
    path: str = "hf"
    weights: str = "fp32"
    rows: str = ""
    whole: bool = True  # the rows forward runs every call (a target); False: feeds up to SHORT_ROWS (a draft)


def default_rows(available: tuple[str, ...]) -> str:
    return next((r for r in ROWS if r in available), "")


def kernel(forward: Forward, tokens: int, exact: bool, chain: bool) -> str:
    if forward.path == "hf":
        return "hf"
    if forward.rows == "native" and (forward.whole or tokens <= SHORT_ROWS):
        return "native"  # a target's prefill too: every float the kernels' own, the same on every CPU
    if not forward.whole:
        return "lean"  # a draft: q is what it sampled from, so long feeds take the batched layers
    if not forward.rows or not (exact or tokens == 1):
        return "lean"
    if forward.rows == "script" and not chain:
        return "eager"
    return forward.rows
