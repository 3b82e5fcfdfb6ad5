"""From settings to a ready engine: the one place models, heads and calibration are put together.

Contract: ``load_engine(target, draft, ...)`` loads the target (default: the shipped one), the draft
(default: the shipped one; None loads none) and the head folders (``heads``; default: next to the
target), then calibrates when ``calibration`` names a mode ("auto" by default here, because
whoever calls this asked for a ready-to-run engine; ``Engine(...)`` itself never calibrates).
``engine_from_args(ns)`` does the same from the parsed flags every command shares (``--model``,
``--target``, ``--draft``, ``--no-draft``, ``--device``, ``--dtype``, ``--weights``,
``--recalibrate``; specdec/cli/args.py declares them; ``progress``, if given, is called with one
line per phase: resolving, loading, weight format, calibrating): the catalogue turns them into folders
(specdec/catalog/resolve.py) and the engine keeps that choice as ``engine.source``, its one record
of what it runs (``engine.model``, the catalogue entry front ends describe, and ``engine.model_name``
read it). The target's weight format is set before the rest of
calibration, which then times the paths of the format that runs.
"""

from __future__ import annotations

from pathlib import Path

from specdec.catalog.resolve import resolve
from specdec.engine.session import Engine
from specdec.paths import DEFAULT_DRAFT, DEFAULT_TARGET


def load_engine(
    target: Path | str | None = None,
    draft: Path | str | None = DEFAULT_DRAFT,
    device: str = "cpu",
    dtype: str | None = "auto",
    calibration: str | None = "auto",
    heads: Path | str | None = None,
) -> Engine:
    return Engine.load(
        target or DEFAULT_TARGET, draft, device=device, dtype=dtype, heads_dir=heads, calibration=calibration
    )


def engine_from_args(args, progress=None) -> Engine:
    say = progress or (lambda _text: None)  # a front end's progress line (``specdec demo``: stderr)
    say("resolving the model (a GGUF given by path is converted once, about a minute) ...")
    choice = resolve(
        getattr(args, "model", None),
        args.target,
        args.draft,
        args.no_draft,
        default=getattr(args, "default_model", "tiny"),
    )
    mode = "recalibrate" if getattr(args, "recalibrate", False) else "auto"
    weights = _weights(args, choice)
    dtype = args.dtype
    if dtype == "auto" and weights == "fp32" and args.device == "cpu" and choice.model is not None:
        # e.g. the Qwen pair in bf16 where its weights stay floating point: fp32 would double the
        # bytes a step reads; the 4-bit formats are made from float32 weights (models/quant.py)
        dtype = choice.model.extra.get("dtype", dtype)
    say(f"loading {choice.name} from {choice.target} ...")
    engine = load_engine(choice.target, choice.draft, args.device, dtype, None, heads=choice.heads)
    engine.source = choice  # engine.model, engine.model_name and what vLLM's rows export read it
    say(f"choosing the weight format ({weights}; timed once per machine, then cached) ...")
    draft_weights(engine, choice, choose_weights(engine, weights, mode))
    say(f"calibrating ({mode}: this machine's fastest paths, cached after the first time) ...")
    engine.calibrate(mode)
    t = engine.target
    batched = _batched(getattr(args, "max_batch", None), getattr(args, "concurrency", None))
    if batched and t.weights != "fp32" and t.forward.rows != "native" and "native" in t.rows():
        t.use_rows("native")  # a batch runs the native loops (BatchTarget.use): the solo path takes them too
    return engine


def draft_weights(engine, choice, fmt: str) -> str:
    """A draft that is itself a catalogue model from a GGUF (the Qwen pair's 0.5B) runs in its
    target's weight format too, where it can (``specdec/proposers/draft_quant.py``): with the
    target on 4-bit blocks and the draft in floating point, a draft step would cost more than a
    target step; where the draft's catalogue entry ships a draft vocabulary (``Model.draft_vocab``)
    its LM head is read on those rows only. Trained drafts (SmolLM2's)
    keep their own precision. Returns the draft's format."""
    from specdec.catalog import known, store
    from specdec.proposers import vocab_subset
    from specdec.proposers.draft_quant import formats

    prop = engine.proposers.get("draft")
    name = choice.model.draft if choice.model is not None else None
    if fmt == "fp32" or prop is None or name is None or choice.draft is None:
        return "fp32"
    m = known.get(name)
    if not (m.parts and store.installed(m) and choice.draft.resolve() == store.require(m).resolve()):
        return "fp32"  # --draft named another model
    if fmt not in formats(prop.model):
        return "fp32"
    prop.set_weights(fmt)
    ids = vocab_subset.load(m.draft_vocab) if m.draft_vocab is not None else None
    if ids is not None:  # FR-Spec: a draft vocabulary made for it (specdec/training/draft_vocab.py)
        prop.set_vocab(ids)
    return fmt


def _batched(max_batch: int | None, concurrency) -> bool:
    return (max_batch or 1) > 1 or concurrency is not None


def _weights(args, choice) -> str:
    """``--weights``; its ``auto`` measures only for a catalogue model from a GGUF on the CPU. A
    command that batches requests (``--max-batch`` above 1 or any ``--concurrency``) takes the 4-bit
    formats only where the native kernels built: the batch target then runs every row through the
    native loops, bit for bit its solo forward (``models/lean_rows.py``, tests/test_batch_native.py);
    without them a batch's ragged forward attends per group, not per row, so it keeps fp32
    (before 2026-12-07 every batch did: on q4_1 a batch of one gave other tokens than the solo path)."""
    from specdec.kernels import native

    weights = getattr(args, "weights", "auto")
    from_gguf = choice.model is not None and bool(choice.model.parts)
    batched = _batched(getattr(args, "max_batch", None), getattr(args, "concurrency", None))
    exact_batch = not batched or native() is not None
    return "fp32" if weights == "auto" and (not from_gguf or args.device != "cpu" or not exact_batch) else weights


def choose_weights(engine, weights: str, mode: str = "auto") -> str:
    """Set the target's weight format (``specdec/fast/calibrate_weights.py``); returns it."""
    if weights == "fp32" and engine.target.weights == "fp32":
        return "fp32"
    from specdec.fast.calibrate_weights import choose

    return choose(engine, "recalibrate" if weights == "auto" and mode == "recalibrate" else weights)[0]
