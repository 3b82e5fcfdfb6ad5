"""The engine: one tokenizer, one target and the proposers of every method, and the loop.

Contract: ``session.Engine.stream(prompt, spec)`` runs the speculative loop of docs/architecture.md
(propose, score, then ``specdec.core.step`` verifies, commits and builds the event) one request at
a time; ``Engine.generate`` folds the stream. Constructing an ``Engine`` changes no process-wide
state (no thread counts, no calibration, no cache writes): ``Engine.calibrate()`` does that when a
caller asks. Anything concurrent goes through a backend in ``specdec.serving``.
"""
