"""The WebSocket server over ``BatchBackend``: eight concurrent real clients each get the stream
of its solo run, decoded together (the backend's steps are fewer than the requests' steps). The
wall times of the eight at once and one after another are printed, never asserted (project rule)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from websockets.asyncio.client import connect as aconnect

from specdec.server.ws_protocol import Limits
from specdec.server.ws_server import ServerConfig, StreamServer
from specdec.serving.batch import BatchBackend
from tests.seeded import fixed_k
from tests.serve_helpers import GOOD_ORIGIN, TIMEOUT_S, TOKEN, ServerThread, check_stream
from tests.test_serve import solo

pytestmark = pytest.mark.slow
LIMITS = Limits(max_message_bytes=4096, max_prompt_tokens=200, max_new_tokens=400, max_queue=16)
METHODS = ("none", "lookup", "draft", "eagle", "medusa", "none", "lookup", "draft")


class BatchServerThread(ServerThread):
    def __init__(self, engine, limits: Limits, max_batch: int = 8) -> None:
        super().__init__(engine, limits)
        self.server.backend.shutdown(5)  # the helper's LocalBackend, replaced before it served anything
        backend = BatchBackend(engine, max_batch, limits.max_queue)
        self.server = StreamServer(backend, ServerConfig("127.0.0.1", 0, TOKEN, (GOOD_ORIGIN,), limits))


async def _one(url: str, i: int, prompt: str, params: dict, go: asyncio.Event) -> list[dict]:
    async with aconnect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        assert json.loads(await ws.recv())["type"] == "hello"
        await go.wait()
        await ws.send(json.dumps({"type": "generate", "id": f"b{i}", "prompt": prompt, **params}))
        msgs = []
        while not msgs or msgs[-1]["type"] not in ("done", "error"):
            msgs.append(json.loads(await ws.recv()))
        return msgs


def _run(url: str, requests: list, concurrent: bool) -> tuple[list, float]:
    async def main():
        go = asyncio.Event()
        if not concurrent:
            go.set()
            return [await _one(url, i, p, dict(kw), go) for i, (p, kw) in enumerate(requests)]
        tasks = [asyncio.create_task(_one(url, i, p, dict(kw), go)) for i, (p, kw) in enumerate(requests)]
        await asyncio.sleep(0.2)
        go.set()
        return await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT_S)

    t0 = time.perf_counter()
    out = asyncio.run(main())
    return out, time.perf_counter() - t0


def test_eight_concurrent_clients_each_get_their_solo_stream_in_shared_forwards(engine, prompts):
    requests = [
        (
            prompts[(17 + 3 * i) % len(prompts)][-300:],
            {"method": m, "max_new_tokens": 24 + 4 * i, "k": fixed_k(m)},
        )
        for i, m in enumerate(METHODS)
    ]
    requests[5][1].update(temperature=0.8, seed=5)
    expected = [solo(engine, p, **dict(kw)) for p, kw in requests]
    with BatchServerThread(engine, LIMITS) as srv:
        backend = srv.server.backend
        _run(srv.url, requests[:2], True)  # warm-up
        seq, seq_s = _run(srv.url, requests, False)
        steps0 = backend.steps
        streams, conc_s = _run(srv.url, requests, True)
        batched_steps = backend.steps - steps0
    for i, msgs in enumerate(streams):
        assert check_stream(msgs) == expected[i] == check_stream(seq[i]), f"client {i} got a different stream"
    per_request = sum(sum(1 for m in msgs if m["type"] == "step") for msgs in streams)
    assert batched_steps < per_request  # rows really shared forwards (a structural check, not a timing)
    shared = [m["batch"]["rows"] for msgs in streams for m in msgs if m["type"] == "step"]
    assert len(shared) == per_request and max(shared) > 1  # every step says how many rows shared it
    print(f"8 clients at once {conc_s:.2f} s, one after another {seq_s:.2f} s")  # measured, never asserted
