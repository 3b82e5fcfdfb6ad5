"""``--max-batch`` and ``--kv-tokens`` for every front end, and the one rule that builds its backend.

Contract: ``add_batch_args(parser)`` declares the two options (no torch imported);
``make_backend(args, engine=None, loader=None, max_queue=16)`` returns
``specdec.serving.local.LocalBackend`` for ``--max-batch 1`` (the default of the demo and the
language server: the single-request loop) and ``specdec.serving.batch.BatchBackend`` otherwise
(continuous batching with speculative decoding, docs/batching.md; ``specdec serve``'s default,
``add_batch_args(p, 8)``). Bad values are a ``ConfigError`` before any model loads
(``check_batch_args``).
"""

from __future__ import annotations

import argparse

from specdec.core.config import ConfigError


def add_batch_args(p: argparse.ArgumentParser, default: int = 1) -> None:
    """``default``: the front end's ``--max-batch`` (1: the single-request loop; ``specdec serve``: 8)."""
    g = p.add_argument_group("batching (docs/batching.md)")
    what = "one at a time, the single-request loop" if default == 1 else "continuous batching; 1 = one at a time"
    g.add_argument(
        "--max-batch",
        type=int,
        default=default,
        help=f"requests decoded together in one continuous batch (default {default}: {what})",
    )
    g.add_argument(
        "--kv-tokens",
        type=int,
        default=None,
        help="KV cache size in tokens shared by the batch, preallocated; each request takes a slot of "
        "context + 1 tokens (default: max-batch slots, at most a quarter of the available memory)",
    )


def check_batch_args(args: argparse.Namespace) -> None:
    if args.max_batch < 1:
        raise ConfigError(f"--max-batch must be >= 1, got {args.max_batch}")
    if args.kv_tokens is not None and args.kv_tokens < 1:
        raise ConfigError(f"--kv-tokens must be >= 1, got {args.kv_tokens}")


def make_backend(args: argparse.Namespace, engine=None, loader=None, max_queue: int = 16):
    check_batch_args(args)
    if args.max_batch == 1:
        from specdec.serving.local import LocalBackend

        return LocalBackend(engine, max_queue, loader=loader)
    from specdec.serving.batch import BatchBackend

    try:
        return BatchBackend(engine, args.max_batch, max_queue, args.kv_tokens, loader=loader)
    except ValueError as e:
        raise ConfigError(str(e)) from None
