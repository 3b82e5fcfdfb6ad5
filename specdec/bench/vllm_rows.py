"""vLLM's rows for the concurrency bench: the same prompts and levels through vLLM's own server.

Contract: ``vllm_rows(ids, levels, max_new, ref, methods, k, folders)`` exports the engine's model
(``folders``: ``catalog.resolve.export_folders``; the shipped tiny models when None;
``specdec/export/vllm.py``), and for each method in ``methods`` starts vLLM's OpenAI server from its
venv (``specdec/export/vllm_launch.py``: float32, eager, 512-token context, ``NO_PREFIX_CACHE``)
on a free loopback port, warms
it with two untimed requests, then for each concurrency c runs c closed-loop clients over all
``ids`` (token-id prompts, greedy, ``max_new`` tokens, streamed ``/v1/completions`` with
``return_token_ids``; ``vllm_cells`` does this on a server already running), and stops the
server. Each row is ``{"row": "vllm", "method", "c", tokens, wall_s, tok_s, ttft_p50_ms,
ttft_p95_ms, req_tok_s_p50, req_tok_s_p5, identical}``, the same
fields as the engine's cells (``tools/bench_concurrency._cell``); ``identical`` compares every
request's tokens with ``ref`` (the solo greedy run). vLLM needs its own venv (it pins transformers
< 5.20): without it ``VllmError`` says how to make it. Why a separate process on the same CPU:
the rows must run where ours run; one server runs at a time, and nothing else runs meanwhile.
Why without vLLM's prefix cache (on by default in vLLM 0.32): every level sends the same prompts,
so from the second request of a prompt on vLLM reused its cached blocks and skipped nearly all
of its prefill (its log's prefix cache hit rate reached 62% in one grid), while the engine's batch
prefills every request; the rows then compared a cache against a prefill, not two engines.
"""

from __future__ import annotations

import json
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from specdec.bench.closed_loop import closed_loop

NO_PREFIX_CACHE = ["--no-enable-prefix-caching"]  # the rows prefill every request, as ours do (docstring)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stream(url: str, ids: list[int], n: int) -> tuple[list[int], float | None]:
    """Greedy tokens of one request and the seconds to its first token."""
    body = {"model": "specdec", "prompt": ids, "max_tokens": n, "temperature": 0, "stream": True}
    body["return_token_ids"] = True
    headers = {"Content-Type": "application/json"}
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), headers)
    out: list[int] = []
    t0, first = time.perf_counter(), None
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            if line.startswith(b"data: {"):
                for c in json.loads(line[6:])["choices"]:
                    got = c.get("token_ids") or []
                    if got and first is None:
                        first = time.perf_counter() - t0
                    out += got
    return out, first


def _pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else None


def _cell(url: str, ids: list[list[int]], c: int, n: int) -> tuple[dict, list[list[int]]]:
    out: list = [None] * len(ids)
    ttft, rates, lock = [], [], threading.Lock()

    def job(i: int) -> None:
        t0 = time.perf_counter()
        toks, first = _stream(url, ids[i], n)
        dt = time.perf_counter() - t0
        with lock:
            out[i] = toks
            ttft.append(first or dt)
            rates.append(len(toks) / dt)

    wall = closed_loop(len(ids), c, job)
    tokens = sum(len(t) for t in out)
    cell = {"tokens": tokens, "wall_s": wall, "tok_s": tokens / wall}
    cell |= {"ttft_p50_ms": 1000 * _pct(ttft, 0.5), "ttft_p95_ms": 1000 * _pct(ttft, 0.95)}
    cell |= {"req_tok_s_p50": _pct(rates, 0.5), "req_tok_s_p5": _pct(rates, 0.05)}
    return cell, out


def vllm_rows(
    ids, levels: list[int], max_new: int, ref, methods=("none",), k: int | None = None, folders=None
) -> list[dict]:
    from specdec.export.vllm import export
    from specdec.export.vllm_launch import VllmServer, server_argv, server_env, venv_python
    from specdec.models.loading import ASSETS

    python = venv_python()
    out = Path(tempfile.mkdtemp(prefix="specdec-vllm-bench-"))
    folders = export(out, ASSETS if folders is None else folders)["folders"]
    rows = []
    for method in methods:
        port = free_port()
        argv = server_argv(python, folders, method, k, port=port, extra=NO_PREFIX_CACHE)
        server = VllmServer(argv, server_env(), out / f"vllm-{method}.log", "127.0.0.1", port)
        url = server.start(timeout=600)
        try:
            rows += [{**r, "prefix_cache": False} for r in vllm_cells(url, ids, levels, max_new, ref, method)]
        finally:
            server.stop()
    return rows


def vllm_cells(url: str, ids, levels: list[int], max_new: int, ref, method: str) -> list[dict]:
    """The rows of one running server (``url`` without ``/v1``) serving ``method``."""
    for i in ids[:2]:  # untimed: the first requests pay vLLM's warm-up
        _stream(url, i, max_new)
    rows = []
    for c in levels:
        cell, got = _cell(url, ids, c, max_new)
        rows.append({"row": "vllm", "method": method, "c": c, **cell, "identical": got == ref})
        print(f"  c={c:<3} vllm {method:<7} {cell['tok_s']:7.1f} tok/s  identical={got == ref}", file=sys.stderr)
    return rows
