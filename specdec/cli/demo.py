"""Serve the browser demo: live token fates, acceptance plots, a race against the baseline, theory.

Contract: ``add_arguments(parser)`` adds --host/--port and the model options; ``run(args)`` loads
the models once (never at import), printing each phase on stderr (loading, weight format,
calibrating, serving at URL, with the seconds since start) and serving them meanwhile as a
self-reloading page on the demo's address (specdec/demo/loading.py), prints the URL and serves until
interrupted. gradio and torch are imported inside ``run`` so ``specdec --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

EPILOG = """views:
  Generate  every token coloured by its fate (accepted, rejected, recovered, bonus), live stats and plots;
            mode "show me" drafts k tokens every step, "fastest" is auto k (drafts only where it pays)
  Chat      a conversation through the model's chat template, every reply token coloured by its fate
            (models with a chat template, e.g. smollm2-135m; --model tiny is a base model)
  Step      one verification step at a time with the verifier's record (p, q, u, verdict, residual)
  Race      the baseline and a method, repeated with alternating sides: median speedup and its spread
  Teach     the speedup equation with sliders, and rejection sampling checked by Monte Carlo

API: a streaming endpoint /generate (prompt, method, k, temperature, max_new_tokens, seed); see docs/demo.md.

examples:
  specdec demo                              # http://127.0.0.1:7860
  specdec demo --model tiny                 # the shipped tiny models (draft, Medusa, EAGLE)
  specdec demo --port 8080 --host 0.0.0.0   # listen on every interface (mind who can reach it)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from specdec.cli.args import add_model_args
    from specdec.cli.batch_args import add_batch_args

    parser.epilog = EPILOG
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1, this machine only)")
    parser.add_argument("--port", type=int, default=7860, help="port to listen on (default: 7860)")
    add_batch_args(parser)
    add_model_args(parser)
    from specdec.cli.backend_arg import add_backend_arg

    add_backend_arg(parser)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from specdec.cli.args import load_engine
    from specdec.cli.batch_args import check_batch_args, make_backend
    from specdec.demo.loading import LoadingPage
    from specdec.serving.remote import backend_for

    check_batch_args(args)
    start = time.monotonic()
    loading = LoadingPage(args.host, args.port)  # the URL answers at once, with these lines

    def say(text: str) -> None:  # progress on stderr, so a silent minute is never a mystery
        line = f"[{time.monotonic() - start:5.1f} s]: {text}"
        loading.say(line)  # first: whoever reads the printed line may open the page at once
        print(f"specdec demo {line}", file=sys.stderr, flush=True)

    say(f"starting: http://{args.host}:{args.port}/ shows this progress until the model is ready")
    try:
        backend = backend_for(args, lambda: make_backend(args, load_engine(args, say)))
    finally:
        loading.close()  # the demo binds the same port next
    from specdec.demo.layout import launch_demo

    where = backend.describe() if hasattr(backend, "describe") else "the embedded engine"
    say(f"on {where} (methods: {', '.join(backend.methods)}); starting the web server ...")
    demo, _ = launch_demo(backend, args.host, args.port, prevent_thread_lock=True, quiet=True)
    say(f"ready: serving at http://{args.host}:{demo.server_port}/")
    print(f"specdec demo: open http://{args.host}:{demo.server_port}/  (Ctrl+C to stop)", flush=True)
    try:
        demo.block_thread()
    except KeyboardInterrupt:
        pass
    finally:
        demo.close()
    return 0
