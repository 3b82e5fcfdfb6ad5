"""The algorithm: request settings, drafts, the one verifier, the one step, sampling, events, theory.

Contract: pure computation over tensors and token lists. No threads, no I/O, no model loading, and
nothing of the rest of the package is imported here (tests/test_structure.py checks it): the models,
proposers, serving and front ends all build on this layer. What lives here: ``config`` (validated
request settings and the one k rule), ``methods`` (the method registry as data), ``tree`` (a draft:
chain or tree, and its attention mask), ``verify`` (the exact verifier, p target and q draft),
``step`` (verify, commit, pieces and stats of one speculative step, shared by the single-request loop
and every batch row), ``sampling``, ``events`` (what front ends render), ``healing`` (token healing
as an exact draw), ``detok``, ``record``, ``confidence``, ``seq`` and ``theory`` (the closed-form
speedup model auto k uses).
"""
