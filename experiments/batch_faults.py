"""A bounded fault run of the WebSocket server over ``BatchBackend``: many clients, random cancels
and disconnects; every accepted request must end with ``done`` (or its cancel) and the backend
must return to idle.

Contract: ``python -m experiments.batch_faults [--clients 32] [--seconds 120] [--max-batch 16]`` serves
the shipped models in-process on a free loopback port and runs ``--clients`` real websockets
clients until ``--seconds`` have passed (the loop stops by itself). Each client repeats: send a
generate request (random method and prompt, 8-48 tokens), then either read to ``done``, send a
cancel after a few steps, or drop the connection mid-stream (and reconnect). At the end it prints
JSON counts (requests, done by stop reason, cancels, disconnects, busy, errors) and the backend's
idle state: rows, queue, slot lengths, KV bytes, and the process's max resident memory before and
after. Exit status 1 when a request ended otherwise than done/cancelled, or slots leaked.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import resource
import sys
import threading
import time

from websockets.asyncio.client import connect


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m experiments.batch_faults", description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--seconds", type=float, default=120.0)
    p.add_argument("--max-batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=15)
    return p.parse_args(argv)


async def _client(url: str, i: int, prompts: list[str], methods: list[str], until: float, counts, rng) -> None:
    while time.monotonic() < until:
        try:
            async with connect(url, open_timeout=30) as ws:
                json.loads(await ws.recv())  # hello
                while time.monotonic() < until:
                    rid = f"c{i}-{counts['sent']}"
                    counts["sent"] += 1
                    msg = {"type": "generate", "id": rid, "prompt": rng.choice(prompts)[-240:]}
                    msg.update(method=rng.choice(methods), max_new_tokens=rng.randint(8, 48))
                    await ws.send(json.dumps(msg))
                    fate, steps = rng.random(), 0
                    while True:
                        m = json.loads(await asyncio.wait_for(ws.recv(), 120))
                        if m["type"] == "step":
                            steps += 1
                            if fate < 0.2 and steps == 2:
                                await ws.send(json.dumps({"type": "cancel", "id": rid}))
                                counts["cancel_sent"] += 1
                            if 0.2 <= fate < 0.3 and steps == 2:
                                counts["disconnects"] += 1
                                raise ConnectionAbortedError
                        elif m["type"] == "done":
                            counts[f"done:{m['stop']}"] += 1
                            break
                        elif m["type"] == "error":
                            counts[f"error:{m.get('code', '?')}"] += 1
                            break
        except ConnectionAbortedError:
            continue


def main(argv=None) -> int:
    args = _parse(argv)
    from specdec.bench.run import load_prompts
    from specdec.engine.session import Engine
    from specdec.server.ws_protocol import Limits
    from specdec.server.ws_server import ServerConfig, StreamServer
    from specdec.serving.batch import BatchBackend

    engine = Engine.load(calibration="auto")
    prompts = load_prompts("assets/prompts/code.jsonl")
    backend = BatchBackend(engine, args.max_batch, max_queue=64)
    limits = Limits(max_prompt_tokens=engine.context - 1, max_new_tokens=64, max_queue=64)
    server = StreamServer(backend, ServerConfig("127.0.0.1", 0, None, (), limits))
    ready, box = threading.Event(), {}

    async def serve():
        box["loop"], box["stop"] = asyncio.get_running_loop(), asyncio.Event()
        await server.run(box["stop"], lambda port: ready.set())

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    ready.wait(60)
    url = f"ws://127.0.0.1:{server.port}"
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    counts: collections.Counter = collections.Counter()
    rng = random.Random(args.seed)
    until = time.monotonic() + args.seconds

    async def clients():
        await asyncio.gather(
            *(_client(url, i, prompts, list(engine.methods), until, counts, rng) for i in range(args.clients))
        )

    asyncio.run(clients())
    deadline = time.monotonic() + 60
    while not backend.idle and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the last records are appended just after their done went out
    stops = collections.Counter(r.stop for r in backend.finished)
    idle = {
        "idle": backend.idle,
        "rows": len(backend.rows),
        "queued": backend.queued,
        "slot_lengths": sorted(set(backend._target.cache.lengths)),
        "kv_bytes": backend.stats()["kv_bytes"],
        "max_rss_mb_before": rss0 // 1024,
        "max_rss_mb_after": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }
    box["loop"].call_soon_threadsafe(box["stop"].set)
    thread.join(60)
    report = {"clients": args.clients, "seconds": args.seconds, "counts": dict(counts), "last_256_stops": dict(stops)}
    print(json.dumps({**report, **idle}, indent=2))
    bad = [k for k in counts if k.startswith("done:") and k not in ("done:eos", "done:length", "done:cancelled")]
    return 1 if bad or not idle["idle"] or idle["slot_lengths"] != [0] else 0


if __name__ == "__main__":
    sys.exit(main())
