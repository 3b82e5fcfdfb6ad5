"""From settings to a ready engine: the one place models, heads and calibration are put together.

Contract: ``load_engine(target, draft, ...)`` loads the target (default: the shipped one), the draft
(default: the shipped one; None loads none) and the head folders next to the target, then
calibrates when ``calibration`` names a mode ("auto" by default here, because whoever calls this
asked for a ready-to-run engine; ``Engine(...)`` itself never calibrates). ``engine_from_args(ns)``
does the same from the parsed flags every command shares (``--target``, ``--draft``,
``--no-draft``, ``--device``, ``--dtype``, ``--recalibrate``; specdec/cli/args.py declares them).
"""

from __future__ import annotations

from pathlib import Path

from specdec.engine.session import Engine
from specdec.paths import DEFAULT_DRAFT, DEFAULT_TARGET


def load_engine(
    target: Path | str | None = None,
    draft: Path | str | None = DEFAULT_DRAFT,
    device: str = "cpu",
    dtype: str | None = "auto",
    calibration: str | None = "auto",
) -> Engine:
    return Engine.load(target or DEFAULT_TARGET, draft, device=device, dtype=dtype, calibration=calibration)


def engine_from_args(args) -> Engine:
    draft = None if args.no_draft else (args.draft or DEFAULT_DRAFT)
    mode = "recalibrate" if getattr(args, "recalibrate", False) else "auto"
    return load_engine(args.target, draft, args.device, args.dtype, mode)
