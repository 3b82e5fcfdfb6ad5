"""Benchmark of the WebSocket server: its overhead over the engine alone, and throughput with 1, 4, 8 clients.

Contract: ``python -m specdec.bench.ws_bench [options]`` loads one engine, serves it in-process (a
``StreamServer`` on a free loopback port, its own thread and event loop) and drives it with real
websockets clients in the same process (so the client's own parsing counts against the server).
Overhead: for every prompt and repeat it runs, back to back in a rotating order, the engine alone
(``engine.generate``), the engine alone again (an A/A control that shows the noise floor) and the
same greedy request through the server (send -> done received); the engine alone runs in a worker
thread, as it does in the server. Each run starts after an untimed two-token request on another
prompt to both engines, because the target and draft caches reuse a common prefix.
It reports the medians of the per-triple wall-time ratios, and the CPU time of the server's
event-loop thread and of the client as a share of the engine's time. Throughput: the same prompts
spread round-robin over N concurrent connections, wall time for all, the median of ``--repeats`` passes
that interleave the levels. Prints markdown tables and
writes JSON (``--out``). Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tqdm import tqdm

from specdec import env
from specdec.paths import DEFAULT_PROMPTS

PROMPTS = DEFAULT_PROMPTS


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m specdec.bench.ws_bench", description=__doc__.splitlines()[0])
    p.add_argument("--prompts", type=Path, default=PROMPTS, help="JSONL with a 'prompt' field per line")
    p.add_argument("--n-prompts", type=int, default=8, help="how many prompts (the first N)")
    p.add_argument("--prompt-chars", type=int, default=600, help="keep the last N characters of each prompt")
    p.add_argument("--methods", default="none,draft", help="comma-separated methods to measure")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument(
        "--repeats", type=int, default=3, help="overhead runs (engine, engine again, server) per prompt and method"
    )
    p.add_argument("--clients", default="1,4,8", help="concurrency levels for the throughput table")
    p.add_argument(
        "--in-process",
        action="store_true",
        help="serve from a thread of this process (same engine object; the client shares its GIL) "
        "instead of a `specdec serve` child process",
    )
    p.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    return p.parse_args(argv)


class InProcessServer:
    """A StreamServer on a free loopback port in a background thread with its own event loop."""

    def __init__(self, engine, max_queue: int) -> None:
        from specdec.server.ws_protocol import Limits
        from specdec.server.ws_server import ServerConfig, StreamServer
        from specdec.serving.local import LocalBackend

        limits = Limits(max_prompt_tokens=engine.context - 1, max_new_tokens=engine.context, max_queue=max_queue)
        self.server = StreamServer(LocalBackend(engine, max_queue), ServerConfig("127.0.0.1", 0, None, (), limits))
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)

    async def _main(self) -> None:
        self.loop, self.stop = asyncio.get_running_loop(), asyncio.Event()
        self._clock = time.pthread_getcpuclockid(threading.get_ident())
        await self.server.run(self.stop, lambda port: self._ready.set())

    def loop_cpu(self) -> float:
        """CPU seconds used so far by the server's event-loop thread."""
        return time.clock_gettime(self._clock)

    def __enter__(self) -> str:
        self._thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the server did not start")
        return f"ws://127.0.0.1:{self.server.port}"

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self._thread.join(60)


class ServeProcess:
    """``specdec serve --port 0`` as a child process, as users run it; stopped with SIGTERM."""

    def __init__(self, max_queue: int) -> None:
        self.argv = [sys.executable, "-m", "specdec", "serve", "--port", "0", "--max-queue", str(max_queue)]

    def loop_cpu(self) -> float:
        """CPU seconds used so far by the server's main thread (its event loop), from /proc (10 ms ticks)."""
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> str:
        self.proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=None if env.get("WS_BENCH_DEBUG") else subprocess.DEVNULL,
            text=True,
        )
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise RuntimeError(f"specdec serve did not start: {line!r}")
        return line.split(" on ", 1)[1].split()[0]

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def request(ws, rid: str, prompt: str, method: str, n: int) -> dict[str, Any]:
    """One generate through the server; returns the done message with the client-side timings added."""
    t0 = time.perf_counter()
    await ws.send(
        json.dumps(
            {"type": "generate", "id": rid, "prompt": prompt, "method": method, "max_new_tokens": n, "temperature": 0}
        )
    )
    first = None
    while True:
        msg = json.loads(await ws.recv())
        if msg["type"] == "step" and first is None:
            first = time.perf_counter() - t0
        if msg["type"] in ("done", "error"):
            if msg["type"] == "error":
                raise RuntimeError(f"server error: {msg}")
            msg["wall_s"], msg["first_step_s"] = time.perf_counter() - t0, first
            return msg


async def overhead(
    engine,
    server: InProcessServer | ServeProcess,
    url: str,
    prompts: list[str],
    methods: list[str],
    n: int,
    repeats: int,
) -> list[dict]:
    from websockets.asyncio.client import connect

    from specdec.core.config import GenerateSpec

    rows = []

    # The engine alone runs in one worker thread, as in the server: under load, torch in the main thread
    # (two OpenMP threads) was measured 6-19x slower than in a second thread on this 2-core machine.
    pool, loop = ThreadPoolExecutor(1, thread_name_prefix="engine-alone"), asyncio.get_running_loop()

    async def alone(prompt: str, spec):
        return await loop.run_in_executor(pool, engine.generate, prompt, spec)

    bust_method = "draft" if "draft" in engine.methods else "none"

    async def bust(ws) -> None:  # the target and the draft reuse a cached common prefix: start each run cold
        await alone("#", GenerateSpec(method=bust_method, max_new_tokens=2))
        await request(ws, "bust", "#", bust_method, 2)  # the server's engine (its own in a child process)

    async with connect(url) as ws:
        json.loads(await ws.recv())  # hello
        for method in methods:
            spec = GenerateSpec(method=method, max_new_tokens=n)
            await alone(prompts[0], spec)
            await request(ws, "warm", prompts[0], method, n)
            runs = []
            bar = tqdm(total=repeats * len(prompts), desc=f"overhead {method}", file=sys.stderr, leave=False)
            for r in range(repeats):
                for i, prompt in enumerate(prompts):
                    run: dict[str, float] = {}
                    order = ("engine", "engine_again", "server")
                    for which in order[(r + i) % 3 :] + order[: (r + i) % 3]:
                        await bust(ws)
                        loop_c0, client_c0 = server.loop_cpu(), time.thread_time()
                        t0 = time.perf_counter()
                        if which == "server":
                            done = await request(ws, f"{method}-{r}-{i}", prompt, method, n)
                            served, run["server_engine"] = done["tokens"], done["stats"]["elapsed_s"]
                            run["loop_cpu"] = server.loop_cpu() - loop_c0
                            run["client_cpu"] = time.thread_time() - client_c0
                        else:
                            res = await alone(prompt, spec)
                            tokens, run[which + "_engine"] = len(res.tokens), res.stats.elapsed_s
                        run[which] = time.perf_counter() - t0
                    if served != tokens:
                        raise RuntimeError(f"server emitted {served} tokens, the engine {tokens}")
                    run["tokens"] = tokens
                    runs.append(run)
                    bar.update()
            bar.close()
            rows.append(_overhead_row(method, runs))
    pool.shutdown()
    return rows


def _overhead_row(method: str, runs: list[dict[str, float]]) -> dict[str, Any]:
    tok = sum(r["tokens"] for r in runs)
    med = lambda key: statistics.median(r[key] / r["engine"] for r in runs)  # noqa: E731
    share = lambda key: 100 * sum(r[key] for r in runs) / sum(r["engine"] for r in runs)  # noqa: E731
    return {
        "method": method,
        "runs": len(runs),
        "tokens": tok,
        "engine_tok_s": tok / sum(r["engine"] for r in runs),
        "server_tok_s": tok / sum(r["server"] for r in runs),
        "median_server_ratio": med("server"),
        "median_aa_ratio": med("engine_again"),
        "median_engine_in_server_ratio": statistics.median(r["server_engine"] / r["engine_engine"] for r in runs),
        "loop_cpu_pct": share("loop_cpu"),
        "client_cpu_pct": share("client_cpu"),
    }


async def throughput(url: str, prompts: list[str], method: str, n: int, clients: int) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    async def one(c: int) -> list[dict]:
        async with connect(url) as ws:
            json.loads(await ws.recv())
            return [
                await request(ws, f"t{clients}-{c}-{i}", p, method, n)
                for i, p in enumerate(prompts)
                if i % clients == c
            ]

    t0 = time.perf_counter()
    results = [d for ds in await asyncio.gather(*(one(c) for c in range(clients))) for d in ds]
    wall = time.perf_counter() - t0
    tokens = sum(d["tokens"] for d in results)
    return {
        "clients": clients,
        "method": method,
        "requests": len(results),
        "tokens": tokens,
        "wall_s": wall,
        "tok_s": tokens / wall,
        "median_first_step_s": statistics.median(d["first_step_s"] for d in results),
        "max_first_step_s": max(d["first_step_s"] for d in results),
    }


def _median_pass(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """The pass with the median tokens/s (levels are interleaved over the passes, so drift hits all alike)."""
    ranked = sorted(passes, key=lambda p: p["tok_s"])
    return dict(ranked[len(ranked) // 2], passes=len(passes), tok_s_all=[round(p["tok_s"], 1) for p in passes])


def report(rows: list[dict], thr: list[dict], meta: dict) -> str:
    lines = [
        f"engine alone vs through the server ({meta['server']}, {meta['prompts']} prompts x {meta['repeats']} repeats, "
        f"max_new_tokens {meta['max_new_tokens']}, greedy, runs interleaved; CPU as % of the engine's time)",
        "",
        "| method | runs | tokens | engine tok/s | server tok/s | server / engine (median) | "
        "engine again / engine (A/A) | engine loop inside server / alone | server loop CPU | client CPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['method']} | {r['runs']} | {r['tokens']} | {r['engine_tok_s']:.1f} | {r['server_tok_s']:.1f} | "
        f"{r['median_server_ratio']:.3f} | {r['median_aa_ratio']:.3f} | "
        f"{r['median_engine_in_server_ratio']:.3f} | {r['loop_cpu_pct']:.1f}% | "
        f"{r['client_cpu_pct']:.1f}% |"
        for r in rows
    ]
    lines += [
        "",
        f"throughput: {meta['prompts']} requests spread over N concurrent connections (method "
        f"{thr[0]['method'] if thr else '-'}; the median of {meta['repeats']} interleaved passes)",
        "",
        "| clients | requests | tokens | wall s | tok/s | median first step s | max first step s |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {t['clients']} | {t['requests']} | {t['tokens']} | {t['wall_s']:.2f} | {t['tok_s']:.1f} | "
        f"{t['median_first_step_s']:.2f} | {t['max_first_step_s']:.2f} |"
        for t in thr
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from specdec.engine.session import Engine

    lines = [line for line in args.prompts.read_text(encoding="utf-8").splitlines() if line.strip()]
    prompts = [json.loads(line)["prompt"][-args.prompt_chars :] for line in lines[: args.n_prompts]]
    methods = [m for m in args.methods.split(",") if m]
    levels = [int(c) for c in args.clients.split(",") if c]
    engine = Engine.load()
    queue = max(levels + [1]) * 2
    server = InProcessServer(engine, queue) if args.in_process else ServeProcess(queue)
    with server as url:
        rows = asyncio.run(overhead(engine, server, url, prompts, methods, args.max_new_tokens, args.repeats))
        passes = [
            asyncio.run(throughput(url, prompts, methods[-1], args.max_new_tokens, c))
            for _ in tqdm(range(args.repeats), desc="throughput", file=sys.stderr, leave=False)
            for c in levels
        ]
    thr = [_median_pass([p for p in passes if p["clients"] == c]) for c in levels]
    meta = {
        "server": "in-process thread" if args.in_process else "specdec serve child process",
        "prompts": len(prompts),
        "repeats": args.repeats,
        "max_new_tokens": args.max_new_tokens,
        "torch_threads": torch.get_num_threads(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(report(rows, thr, meta))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"meta": meta, "overhead": rows, "throughput": thr}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
