"""specdec's language server: speculative code completion for editors over LSP (pygls 2).

``lsp.completion`` is the pure logic (options, positions, windowing, stop modes, typed-ahead
cache), ``lsp.completer`` the bridge to a backend (requests it can cancel between steps; prompt
lookup also copies from the editor's other documents), ``lsp.server`` the thin pygls handlers.
The ``specdec lsp`` subcommand is ``app/lsp_cli.py``, the latency benchmark ``tools/lsp_bench.py``.
See docs/lsp.md.
"""
