"""CPU speed paths chosen by measurement on the running machine, and only when a caller asks.

Contract: ``calibrate.calibrate(engine, mode)`` times the engine's alternatives (lean or stock
forwards, packed linears, the proposers' weight precision in ``lowp``, thread counts in
``calibrate_time``) and applies the fastest; it sets process-wide state (torch's thread count, the
packed-linear plan) and reads or writes a per-machine cache under ``~/.cache/specdec``, so it runs
only when asked: the CLI and the front ends ask by default, ``Engine(...)`` never does.
``threads`` learns the batch forwards' thread counts from the real forwards; ``omp`` hands back
OpenMP workers between threads. Imports ``specdec.core`` and ``specdec.models``.
"""
