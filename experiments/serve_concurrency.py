"""8 WebSocket clients at once against the same 8 one after another, on a real ``specdec serve``.

Usage: ``python -m experiments.serve_concurrency [--clients 8] [--tokens 64] [--repeats 2] -- SERVE
ARGS...`` (e.g. ``-- --max-batch 1`` and ``-- --max-batch 8``). It starts ``specdec serve --port 0
ARGS``, sends each of the first ``clients`` shipped code prompts (last 600 characters, greedy,
``max_new_tokens`` = ``tokens``, the server's default method) once in sequence and once all at once,
``repeats`` times alternating, and prints the wall seconds of each, the ratio sequential / concurrent
(the median over repeats) and whether every concurrent reply equals its sequential one. Why: issue
32 asks that a server's users get batching by default, "8 concurrent clients finish >= 3x faster
than the same 8 in sequence".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

from websockets.sync.client import connect

from specdec.paths import ASSETS


def prompts(n: int) -> list[str]:
    lines = (ASSETS / "prompts" / "code.jsonl").read_text().splitlines()
    return [json.loads(line)["prompt"][-600:] for line in lines[:n]]


def ask(url: str, prompt: str, tokens: int) -> str:
    with connect(url, open_timeout=60) as ws:
        ws.recv()  # hello
        ws.send(json.dumps({"type": "generate", "id": 1, "prompt": prompt, "max_new_tokens": tokens}))
        while (msg := json.loads(ws.recv(timeout=600)))["type"] not in ("done", "error"):
            pass
        return msg.get("text", msg.get("message"))


def together(url: str, ps: list[str], tokens: int) -> tuple[float, list[str]]:
    out = [""] * len(ps)

    def one(i: int) -> None:
        out[i] = ask(url, ps[i], tokens)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(ps))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, out


def in_turn(url: str, ps: list[str], tokens: int) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    out = [ask(url, p, tokens) for p in ps]
    return time.perf_counter() - t0, out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("serve", nargs="*", help="arguments for specdec serve (after --)")
    args = ap.parse_args(argv)
    cmd = [sys.executable, "-m", "specdec", "serve", "--port", "0", *args.serve]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(os.environ))
    try:
        url = re.search(r"ws://\S+", proc.stdout.readline()).group(0)
        ps = prompts(args.clients)
        in_turn(url, ps[:1], 4)  # warm-up
        ratios, same = [], True
        for r in range(args.repeats):
            seq_s, seq = in_turn(url, ps, args.tokens)
            con_s, con = together(url, ps, args.tokens)
            same &= seq == con
            ratios.append(seq_s / con_s)
            print(f"round {r + 1}: in sequence {seq_s:.2f} s, together {con_s:.2f} s: {seq_s / con_s:.2f}x", flush=True)
        print(f"serve {' '.join(args.serve)}: median {statistics.median(ratios):.2f}x, replies identical: {same}")
    finally:
        proc.terminate()
        proc.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
