"""Measuring: ``specdec bench`` and its peers (transformers, vLLM, a remote server), the k sweep.

Contract: ``run`` (every method on the same prompts in one process, with transformers' rows from
``hf``), ``concurrency`` (throughput against concurrency, with vLLM's rows), ``remote``, ``sweep``,
``ws_bench`` and ``lsp_bench``/``lsp_replay`` measure and write JSON results; ``metrics``,
``categories`` (the figures per workload category) and ``table`` turn them into figures;
``prompts`` reads the prompt sets (files, folders, set names; assets/prompts/README.md). The
measurements docs quote and tests run (``step_rows``, ``batch_phases``, ``lookup_k_trace``,
``lookup_k_ab``, ``lsp_profile``: ``python -m specdec.bench.NAME``; ``chain_accept``) and the
docs' build (``docs``: every measured figure of docs/ and README.md from docs/results) live here,
not in the checkout's experiments/.
Command-line parsing lives in ``specdec.cli``; nothing in the package but the CLI imports this.
docs/bench.md.
"""
