"""``--backend URL`` for every front end: run on a remote OpenAI-compatible server instead of the
embedded engine (``specdec/serving/remote.py``).

Contract: ``add_backend_arg(parser)`` adds ``--backend URL`` and ``--backend-token T`` (default:
``$SPECDEC_BACKEND_TOKEN``), which ``specdec.serving.remote.backend_for(args, local)`` reads: a
ready ``RemoteBackend`` when ``--backend`` is given (tokenizing with ``--target``'s tokenizer, the
shipped one by default), else ``local()``; ``remote_events`` streams one request. An unreachable server is a
``ConfigError`` (one-line error, exit 2).
"""

from __future__ import annotations

import argparse


def add_backend_arg(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("backend")
    g.add_argument(
        "--backend",
        default=None,
        metavar="URL",
        help="decode on an OpenAI-compatible server (specdec vllm serve, or specdec serve's /v1) instead of "
        "the embedded engine; it cannot show rejected tokens (vLLM never exposes them)",
    )
    g.add_argument("--backend-token", default=None, help="Bearer token for --backend (default: $SPECDEC_BACKEND_TOKEN)")


def remote_events(args: argparse.Namespace, prompt: str, spec):
    """``specdec generate --backend URL``: the request's events from the remote server."""
    from specdec.serving.backend import Request
    from specdec.serving.remote import backend_for

    return iter(backend_for(args, None).submit(Request(prompt, spec)))
