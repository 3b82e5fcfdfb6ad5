"""``specdec llamacpp build|path|server``: llama.cpp's ``llama-server``, built once from the registry's sources.

Contract: ``build [--jobs N]`` builds ``llama-server`` into the cache (specdec/bench/llamacpp_build.py;
a no-op that says so when it is there) and prints its path; ``path`` prints the path of the one
``specdec bench --compare-llamacpp`` would use, or fails naming the command that builds it;
``server [--model NAME | --target x.gguf] [--spec-type T] [--port P] [--threads N]`` starts it on
the model's GGUF file with the bench's flags (``-c 4096 -np 1``, 127.0.0.1) in the foreground
(Ctrl-C stops it). Errors are one line on stderr, status 2.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from specdec import env


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="llamacpp_cmd", required=True)
    b = sub.add_parser("build", help="build llama-server into the cache (about 15 minutes on 2 cores, once)")
    b.add_argument("--jobs", type=int, default=None, help="parallel compile jobs (default: 2 at most)")
    sub.add_parser("path", help="print the llama-server the bench uses (no build)")
    s = sub.add_parser("server", help="start llama-server on a catalogue model's GGUF file")
    s.add_argument("--model", default=None, metavar="NAME", help="a catalogue model (default: smollm2-135m)")
    s.add_argument("--target", default=None, metavar="FILE.gguf", help="any GGUF file instead")
    s.add_argument("--spec-type", default=None, help="llama.cpp's speculative type, e.g. ngram-simple, ngram-mod")
    s.add_argument("--port", type=int, default=8080)
    s.add_argument("--threads", type=int, default=None, help="-t and -tb (default: torch's thread count)")


def run(args: argparse.Namespace) -> int:
    from specdec.bench.llamacpp_build import BuildError, ensure_built, server_binary

    try:
        if args.llamacpp_cmd == "build":
            exe = server_binary(build=False) if env.get("SPECDEC_LLAMACPP") else ensure_built(args.jobs)
            print(exe)
            return 0
        if args.llamacpp_cmd == "path":
            print(server_binary(build=False))
            return 0
        return serve(args, server_binary(build=False))
    except BuildError as e:
        print(f"specdec llamacpp: error: {e}", file=sys.stderr)
        return 2


def serve(args: argparse.Namespace, exe) -> int:
    from pathlib import Path

    from specdec.bench.llamacpp import server_argv
    from specdec.catalog import known, store

    if args.target:
        gguf = Path(args.target)
    else:
        model = known.get(args.model or known.DEFAULT)
        gguf = store.gguf_path(model) if model.gguf else None
    if gguf is None or not gguf.is_file():
        print(f"specdec llamacpp server: error: no GGUF file {gguf or ''} (specdec models fetch)", file=sys.stderr)
        return 2
    if args.threads is None:
        import torch

        args.threads = torch.get_num_threads()
    extra = ["--spec-type", args.spec_type] if args.spec_type else []
    argv = server_argv(exe, gguf, args.threads, args.port, extra)
    print(" ".join(argv), flush=True)
    return subprocess.call(argv)
