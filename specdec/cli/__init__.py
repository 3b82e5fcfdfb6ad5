"""The ``specdec`` command line: one module per subcommand, and the only place argparse lives.

Contract: ``main`` dispatches; ``args`` holds the flags every subcommand shares; each front-end
subcommand (``demo``, ``serve``, ``lsp``, ``sweep``, ``export``, ``vllm``) is a module with
``add_arguments(parser)`` and ``run(args)``, importing its heavy dependencies inside ``run`` so
``specdec --help`` loads no torch. Bad settings end with a one-line error and exit status 2.
"""
