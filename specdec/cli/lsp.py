"""Serve speculative code completions to editors over the Language Server Protocol (stdio or TCP).

Contract: ``add_arguments`` imports nothing heavy; ``run`` builds the server (the models load on
the backend's model thread once the client sends ``initialized``: specdec/lsp/startup.py) and
serves until the client sends ``exit`` (stdio) or the process is stopped (TCP); the exit status
is 0 after ``shutdown`` + ``exit``, 1 for ``exit`` without ``shutdown`` (the LSP specification).
Bad flags end with a one-line error and status 2.
"""

from __future__ import annotations

import argparse

from specdec.core.config import K_MAX

EPILOG = """Editors start it as `specdec lsp` (stdio). Settings, as initializationOptions or
workspace/didChangeConfiguration (optionally under a "specdec" key):
  method            none | draft | lookup | ... (what the loaded models allow; default: lookup,
                    the fastest in the bench, or none without it)
  max_new_tokens    1-256 (default 48)          stop   "line" (default) or "block"
  temperature       0 = greedy (default)        k      "auto" (default) or 1-{K_MAX}
  cache             typed-ahead cache (default true)
  lookup_documents  prompt lookup also copies from the rest of the document and other open
                    documents (default true)
  heal              token healing: the continuation is conditioned on the partial word or
                    indentation before the cursor, exactly (default true)
  multiline         completion-list items may hold newlines (default null: from the client)
  repeat_limit      a unit repeated this many times in a row is junk, not shown (default 3, 0 = off)
  min_confidence    a completion whose tokens' geometric-mean probability is below this is
                    not shown (0-1, default 0.2; 0 = off)
  telemetry         initializationOptions only: a specdec/stats notification after each completion
  wait_for_model    initializationOptions: initialize answers once the model is loaded (default
                    false: at once; the model loads after `initialized`, shown as $/progress)

The model (default --model auto): the most capable catalogue model installed here (never fetching
one; a code model with fill-in-the-middle first, then larger) that fits in memory (estimated from
its files: at most half the memory available and --auto-memory GB) and whose line completion has
p50 <= 150 ms on this machine, else the fastest one measured, else the tiny shipped one (8.7M
parameters, trained here: rough completions). Candidates load one at a time; every step is said on
stderr; the decision and each candidate's figures or failure are cached in ~/.cache/specdec, so a
later start loads the chosen model at once (--recalibrate decides again). --model NAME, or --target
DIR and --draft DIR (local Hugging Face folders, same tokenizer) or --no-draft, pick the model
yourself; $SPECDEC_MODEL sets another default (docs/lsp.md).

examples:
  specdec lsp                                  # stdio, for an editor; the model measured (auto)
  specdec lsp --model smollm2-135m             # that model, no measuring
  specdec lsp --tcp 127.0.0.1:2087             # TCP, for debugging with a client that connects
  specdec lsp --method draft --stop block
  python -m specdec.bench.lsp_bench --limit 10               # latency benchmark through a real LSP client
  python -m specdec.bench.lsp_replay --limit 4 --chars 80    # a held-out file typed key by key
Editor set-up (Neovim, VS Code, Helix): docs/lsp.md.
""".replace("{K_MAX}", str(K_MAX))


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"--tcp wants HOST:PORT, e.g. 127.0.0.1:2087, got {value!r}")
    return host, int(port)


def _gigabytes(value: str) -> int:
    try:
        gb = float(value)
    except ValueError:
        gb = -1.0
    if not gb > 0:
        raise argparse.ArgumentTypeError(f"--auto-memory wants a positive number of GB, got {value!r}")
    return int(gb * 1e9)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from specdec.cli.args import add_model_args
    from specdec.cli.batch_args import add_batch_args

    parser.epilog = EPILOG
    parser.add_argument(
        "--tcp",
        type=_host_port,
        default=None,
        metavar="HOST:PORT",
        help="listen on TCP instead of stdio (bind 127.0.0.1 unless you mean otherwise)",
    )
    parser.add_argument("--method", default=None, help="default method (default: lookup if available, else none)")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="default token limit per completion")
    parser.add_argument(
        "--stop",
        choices=["line", "block"],
        default="line",
        help="line: complete to the end of the line; block: to the end of the indented block",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for the model (default 1: for one short completion of a small model, "
        "a second thread gains little and an editor's machine is busy with other work)",
    )
    parser.add_argument(
        "--auto-memory",
        type=_gigabytes,
        default=None,
        metavar="GB",
        help="--model auto loads no candidate whose estimated peak resident size exceeds this (default 3, "
        "and never more than half the memory available at start-up)",
    )
    parser.add_argument("--log-level", default="WARNING", help="python logging level, on stderr (default WARNING)")
    add_batch_args(parser)
    add_model_args(parser, default="auto")  # specdec/lsp/auto.py: measured on the running machine
    from specdec.cli.backend_arg import add_backend_arg

    add_backend_arg(parser)


def run(args: argparse.Namespace) -> int:
    import logging
    import sys

    from specdec.cli.args import load_engine
    from specdec.cli.batch_args import check_batch_args, make_backend
    from specdec.core.config import ConfigError
    from specdec.lsp.completion import Options, OptionsError
    from specdec.lsp.server import create

    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    check_batch_args(args)
    if args.threads < 1:
        raise ConfigError(f"--threads must be >= 1, got {args.threads}")
    defaults = Options(method=args.method, max_new_tokens=args.max_new_tokens, stop=args.stop)
    try:
        defaults.check((args.method,) if args.method else ())
    except OptionsError as e:
        raise ConfigError(str(e)) from None

    auto = (args.model or (None if args.target else args.default_model)) == "auto"
    if auto and args.backend:  # a remote server's model cannot be measured here: the tokenizer is tiny's, as before
        args.model, auto = "tiny", False

    from specdec.lsp.startup import Gate

    gate = Gate()  # the model loads once the client says ``initialized`` (specdec/lsp/startup.py)
    server = None

    def say(line: str) -> None:  # a step of the loading: on stderr, and in the editor's progress
        print(line, file=sys.stderr, flush=True)
        if server is not None:
            server.loading.note(line)

    def loader():
        import torch

        torch.set_num_threads(args.threads)
        if auto:  # the most capable installed model that fits and meets the latency goal; decided once, cached
            from specdec.lsp.auto import load

            return load(args, defaults, load_engine, say)
        say(f"specdec lsp: loading {args.model or args.target or args.default_model}")
        return load_engine(args)

    from specdec.serving.remote import backend_for

    local = lambda: make_backend(args, loader=gate.then(loader)) if args.max_batch > 1 else None  # None: in-process
    server = create(loader, defaults, backend_for(args, local), gate)
    if args.tcp:
        print(f"specdec lsp: listening on {args.tcp[0]}:{args.tcp[1]}", file=sys.stderr, flush=True)
        server.start_tcp(*args.tcp)
    else:
        server.start_io()
    gate.cancel()  # a client that left before ``initialized``: the model thread ends without loading
    server.backend.shutdown(10)  # join the model thread (it ends before its next step) before exiting
    return 0 if server.protocol.shut_down else 1  # LSP: exit without shutdown is status 1
