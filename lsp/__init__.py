"""specdec's language server: speculative code completion for editors over LSP (pygls 2).

``lsp.completion`` is the pure logic (options, positions, windowing, stop modes, typed-ahead
cache), ``lsp.lookup`` prompt lookup over the editor's documents, ``lsp.completer`` the bridge to
the engine (one worker thread, stoppable between steps), ``lsp.server`` the thin pygls handlers,
``lsp.cli`` the ``specdec lsp`` subcommand and ``lsp.bench`` the latency benchmark. See docs/lsp.md.
"""
