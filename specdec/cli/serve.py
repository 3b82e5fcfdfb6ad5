"""Serve live token fates over WebSockets (protocol v1, docs/websocket.md) from one engine.

Contract: ``add_arguments(parser)`` declares the options and imports nothing heavy; ``run(args)``
loads the engine, prints one ``listening on ws://HOST:PORT`` line to stdout once the socket is
bound (``--port 0`` picks a free port), serves until SIGINT or SIGTERM, then shuts down
gracefully (running requests end with stop ``shutdown``) and returns 0. It also serves
OpenAI-compatible ``/v1/completions`` and ``/v1/chat/completions`` (``specdec/server/openai_api.py``)
on the same port (``one_port.py``: the WebSocket upgrade and the HTTP routes share the listener) and
prints a second line with its URL; ``--openai-port N`` also serves them on a port of their own (the
old layout; 0 = any free port), ``-2`` turns HTTP off. ``--method M [--k K]`` is the default of a
request that names no method (default: the first of the registry's ``GENERATE_ORDER`` the model
offers); a method the model lacks is refused at start with the engine's reason and what to run.
A full queue (``--max-queue``, default 256) answers 429 ``rate_limit_error`` with ``Retry-After``;
``--max-per-client``, ``--max-wait``, ``--allow-origin`` and ``--allow-host`` set the per-client cap, the
wait bound and the Origin / Host allow-lists (``specdec/server/guard.py``).
``--suffix-cache-mb`` caps the suffix cache every request of the method ``suffix`` reads and feeds
(0 = off).
``--backend URL`` serves from a remote OpenAI-compatible server instead of the embedded engine. Bad settings raise
ConfigError (one-line error, exit 2). A non-loopback host without a token prints a warning.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys

from specdec import env

TOKEN_ENV = "SPECDEC_TOKEN"
SUFFIX_CACHE_MB = 64.0  # the suffix cache's default cap (specdec/proposers/suffix.py; docs/suffix.md)
SERVE_MAX_BATCH = 8  # batching by default: 8 rows (docs/batching.md: 3.4x one client at 8, 3.5x at 16)
EPILOG = f"""examples:
  specdec serve                                  # ws://127.0.0.1:8765, no token
  SPECDEC_TOKEN=s3cret specdec serve --port 9000 # clients send Authorization: Bearer s3cret (or ?token=s3cret)
  specdec serve --allow-origin https://my.site --max-per-client 4 --max-wait 10
  specdec serve --method lookup --k 4            # the method of requests that name none
  specdec serve --max-batch 1                    # one request at a time (default: batches of up to 8)
the same port answers the OpenAI API (http://127.0.0.1:8765/v1: /v1/completions, /v1/chat/completions,
/v1/models) and the WebSocket protocol; open assets/web/stream.html in a browser, or from Python:
  from websockets.sync.client import connect
  with connect("ws://127.0.0.1:8765") as ws:
      print(ws.recv())                                    # hello: protocol, methods, limits
      ws.send('{{"type": "generate", "id": "a", "prompt": "def f(x):", "max_new_tokens": 32}}')
      for msg in ws:                                      # start, step..., done
          print(msg)
          if msg.startswith('{{"type":"done"'): break

the protocol (client: generate, cancel; server: hello, queued, start, step, done, error) is in docs/websocket.md.
the token may also come from the {TOKEN_ENV} environment variable.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from specdec.cli.args import add_model_args
    from specdec.cli.batch_args import add_batch_args

    p.epilog = EPILOG
    g = p.add_argument_group("network and security")
    g.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1, this machine only)")
    g.add_argument("--port", type=int, default=8765, help="TCP port (default: 8765; 0 = any free port)")
    g.add_argument(
        "--token", default=None, help=f"require this token from every client (default: ${TOKEN_ENV} if set, else none)"
    )
    g.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="also accept browser pages from this Origin (repeatable, e.g. https://my.site; 'null' for a page "
        "opened from disk, '*' for any); loopback origins (localhost, 127.0.0.1, [::1]) and clients that send "
        "no Origin header are always accepted, every other Origin gets 403",
    )
    g.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also accept requests whose Host header names this host (repeatable); IP addresses, localhost, "
        "the --host name and the --allow-origin hosts are always accepted, other names get 403 (DNS rebinding)",
    )
    g.add_argument(
        "--openai-port",
        type=int,
        default=-1,
        help="OpenAI-compatible /v1/... over HTTP are served on --port (with the WebSocket); this also "
        "serves them on a port of their own (0 = any free port); -2 = no HTTP routes at all",
    )
    m = p.add_argument_group("defaults of a request that names no method")
    m.add_argument(
        "--method",
        default=None,
        help="the default method (default: the first the model offers of draft, eagle, medusa, lookup, none)",
    )
    m.add_argument("--k", default="auto", help="the default method's k: 1-16 or auto (default: auto)")
    lim = p.add_argument_group("limits (each refusal is an error message, never a crash)")
    lim.add_argument(
        "--max-queue",
        type=int,
        default=256,
        help="requests waiting behind the running ones, over all connections (default: 256); one more gets "
        "'busy' (HTTP 429 rate_limit_error with Retry-After)",
    )
    lim.add_argument(
        "--max-per-client",
        type=int,
        default=16,
        help="requests one client may have queued or running, and its largest n (default: 16); a client is a "
        "WebSocket connection, or an HTTP address with its API key; one more gets 'too_many' (HTTP 429)",
    )
    lim.add_argument(
        "--max-wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a request that cannot start within this is refused with a retry time (WebSocket 'queue_timeout', "
        "HTTP 503 with Retry-After), at once when the queue's estimate is longer (default: 30)",
    )
    lim.add_argument(
        "--max-new-tokens",
        type=int,
        default=512,
        help="the length of a chat reply that names none (default: 512; a WebSocket request's default is at most "
        "128); a request may ask up to the model's context",
    )
    lim.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=None,
        help="longest prompt in tokens (default and upper bound: the model's context - 1)",
    )
    lim.add_argument("--max-message-bytes", type=int, default=2**21, help="largest client message (default: 2 MiB)")
    lim.add_argument(
        "--suffix-cache-mb",
        type=float,
        default=SUFFIX_CACHE_MB,
        help=f"memory cap of the suffix cache the method 'suffix' shares across requests (default: "
        f"{SUFFIX_CACHE_MB:g}; least recently used requests' text evicted first; 0 = off: suffix drafts only "
        "from the request's own context; docs/suffix.md)",
    )
    add_batch_args(p, SERVE_MAX_BATCH)
    add_model_args(p)
    from specdec.cli.backend_arg import add_backend_arg

    add_backend_arg(p)


def warnings_for(host: str, token: str | None) -> list[str]:
    """What to warn about before serving: a non-loopback bind without a token."""
    if token or _loopback(host):
        return []
    return [
        f"warning: binding {host!r} (reachable from other machines) without a token; anyone who can reach "
        f"this port can use the model. Pass --token or set {TOKEN_ENV}."
    ]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_args(args: argparse.Namespace) -> None:
    """Refuse bad settings before any model is loaded."""
    from specdec.core.config import ConfigError

    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be in [0, 65535], got {args.port}")
    for name in ("max_queue", "max_new_tokens", "max_message_bytes", "max_per_client"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not args.max_wait > 0:
        raise ConfigError(f"--max-wait must be > 0 seconds, got {args.max_wait}")
    if args.max_prompt_tokens is not None and args.max_prompt_tokens < 1:
        raise ConfigError(f"--max-prompt-tokens must be >= 1, got {args.max_prompt_tokens}")
    if not 0 <= args.suffix_cache_mb < float("inf"):
        raise ConfigError(f"--suffix-cache-mb must be >= 0 (0 = off), got {args.suffix_cache_mb}")


def limits_for(args: argparse.Namespace, context: int):
    from specdec.core.config import ConfigError
    from specdec.server.ws_protocol import Limits

    prompt_cap = context - 1 if args.max_prompt_tokens is None else args.max_prompt_tokens
    if not 1 <= prompt_cap <= context - 1:
        raise ConfigError(
            f"--max-prompt-tokens must be in [1, {context - 1}] (the context is {context}), got {prompt_cap}"
        )
    return Limits(
        max_message_bytes=args.max_message_bytes,
        max_prompt_tokens=prompt_cap,
        max_new_tokens=args.max_new_tokens,
        max_queue=args.max_queue,
        method=args.method,
        k=args.k,
        max_per_client=args.max_per_client,
        max_wait_s=args.max_wait,
        context=context,
    )


def check_method(args: argparse.Namespace, backend) -> None:
    """Refuse a ``--method`` the loaded model does not offer, saying why and what to run."""
    from specdec.core.config import ConfigError, GenerateSpec
    from specdec.core.methods import NAMES

    args.k = GenerateSpec(k=_k(args.k)).k  # the one k check
    if args.method is None or args.method in backend.methods:
        return
    if args.method not in NAMES:
        raise ConfigError(f"--method must be one of {', '.join(NAMES)}, got {args.method!r}")
    engine = getattr(backend, "engine", None)
    why = engine.why_unavailable(args.method) if engine is not None else f"available: {', '.join(backend.methods)}"
    raise ConfigError(f"--method {args.method} is not available: {why}")


def suffix_cache(engine, args: argparse.Namespace):
    """The engine with its suffix cache capped at ``--suffix-cache-mb``: one cache, shared by every
    request the server runs (its proposer is the engine's; batch rows draft from it too)."""
    prop = engine.proposers.get("suffix")
    if prop is not None:
        prop.configure(args.suffix_cache_mb)
    return engine


def _k(value: str):
    from specdec.core.config import parse_k

    return parse_k(value)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import signal

    from specdec.cli.args import load_engine
    from specdec.cli.batch_args import check_batch_args, make_backend
    from specdec.core.config import ConfigError
    from specdec.server.openai_api import OpenAIServer
    from specdec.server.ws_protocol import PROTOCOL_VERSION, default_method
    from specdec.server.ws_server import FLUSH_TIMEOUT_S, ServerConfig, StreamServer
    from specdec.serving.remote import backend_for

    check_args(args)
    check_batch_args(args)
    token = args.token or env.get(TOKEN_ENV)
    for line in warnings_for(args.host, token):
        print(line, file=sys.stderr)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        backend = backend_for(
            args, lambda: make_backend(args, suffix_cache(load_engine(args), args), max_queue=args.max_queue)
        )
    except KeyboardInterrupt:
        return 130
    check_method(args, backend)
    config = ServerConfig(
        args.host,
        args.port,
        token,
        tuple(args.allow_origin),
        limits_for(args, backend.limits.context),
        tuple(args.allow_host),
    )
    http = (
        OpenAIServer(
            backend, config.limits, args.host, args.port, token, False, config.allow_origins, config.allow_hosts
        )
        if args.openai_port != -2
        else None
    )
    server = StreamServer(backend, config, http.serve_socket if http is not None else None)
    openai = None

    def ready(port: int) -> None:
        nonlocal openai
        print(
            f"specdec serve: listening on ws://{args.host}:{port} (protocol {PROTOCOL_VERSION}, methods "
            f"{', '.join(backend.methods)}, default {default_method(backend.methods, args.method)}"
            f"{', token required' if token else ''})",
            flush=True,
        )
        if http is not None:
            print(f"specdec serve: OpenAI-compatible API on http://{args.host}:{port}/v1 (model 'specdec')", flush=True)
        if args.openai_port >= 0:
            c, port = config, args.openai_port
            openai = OpenAIServer(backend, c.limits, args.host, port, token, True, c.allow_origins, c.allow_hosts)
            openai.start()
            print(f"specdec serve: OpenAI-compatible API also on {openai.url}/v1", flush=True)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await server.run(stop, ready)

    try:
        asyncio.run(main())
    except OSError as e:  # e.g. the port is taken
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers were installed
        return 130
    finally:
        for api in (http, openai):
            if api is not None:
                api.stop(drain_s=FLUSH_TIMEOUT_S)
    print("specdec serve: stopped", file=sys.stderr)
    return 0
