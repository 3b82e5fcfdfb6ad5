"""specdec: exact speculative decoding (draft model, prompt lookup, Medusa, EAGLE) in one loop.

The public API, importable from ``specdec`` itself (loaded on first use, so ``import specdec``
costs no torch):

- ``Engine``: one tokenizer, one target and the proposers of every method it can offer;
  ``Engine.stream(prompt, spec)`` yields one ``StepEvent`` per speculative step,
  ``Engine.generate`` folds them; ``Engine.calibrate()`` picks this machine's fast paths when asked
  (constructing an engine changes no process-wide state).
- ``load_engine(target, draft, ...)``: the shipped models (or your folders), calibrated;
  ``load_models`` loads a tokenizer, target and draft without building an engine.
- ``GenerateSpec`` / ``SamplingParams``: a request's validated settings (method, k, sampling).
- ``Backend``, ``Request``, ``LocalBackend``, ``BatchBackend``: the seam every front end talks to,
  with its in-process and continuous-batching implementations (``RemoteBackend`` for a server).
- ``StepEvent``, ``Piece``, ``Stats``: what a step reports (each token's fate, timings, acceptance).

Example (the shipped tiny models; at temperature 0 every method gives plain decoding's tokens):

>>> from specdec import GenerateSpec, load_engine
>>> engine = load_engine(calibration=None)
>>> plain = engine.generate("def add(a, b):", GenerateSpec(method="none", max_new_tokens=16))
>>> fast = engine.generate("def add(a, b):", GenerateSpec(method="draft", k=4, max_new_tokens=16))
>>> fast.tokens == plain.tokens and fast.stats.tau > 1.0
True
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Engine": "specdec.engine.session",
    "EngineBusy": "specdec.engine.session",
    "Result": "specdec.engine.session",
    "load_engine": "specdec.engine.load",
    "load_models": "specdec.models.loading",
    "GenerateSpec": "specdec.core.config",
    "SamplingParams": "specdec.core.config",
    "ConfigError": "specdec.core.config",
    "StepEvent": "specdec.core.events",
    "Piece": "specdec.core.events",
    "Stats": "specdec.core.events",
    "Backend": "specdec.serving.backend",
    "Request": "specdec.serving.backend",
    "Handle": "specdec.serving.backend",
    "LocalBackend": "specdec.serving.local",
    "BatchBackend": "specdec.serving.batch",
    "RemoteBackend": "specdec.serving.remote",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'specdec' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
