"""specdec's language server: speculative code completion for editors over LSP (pygls 2).

``specdec.lsp.completion`` is the pure logic (options, positions, windowing, stop modes, typed-ahead
cache), ``specdec.lsp.completer`` the bridge to a backend (requests it can cancel between steps; prompt
lookup also copies from the editor's other documents), ``specdec.lsp.server`` the thin pygls handlers.
The ``specdec lsp`` subcommand is ``specdec/cli/lsp.py``, the latency benchmark ``specdec/bench/lsp_bench.py``.
See docs/lsp.md.
"""
