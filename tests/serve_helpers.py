"""Helpers for the WebSocket server tests: an in-process server on a free loopback port, run in a
background thread with its own event loop, and small real-client (websockets.sync) utilities.
Every wait is bounded by a timeout, so a broken server fails a test instead of hanging it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from websockets.sync.client import ClientConnection, connect

from specdec.server.openai_api import OpenAIServer
from specdec.server.ws_protocol import Limits
from specdec.server.ws_server import ServerConfig, StreamServer
from specdec.serving.batch import BatchBackend
from specdec.serving.local import LocalBackend

TOKEN = "s3cret-token"
GOOD_ORIGIN = "http://good.example"
TIMEOUT_S = 60.0


class ServerThread:
    """``with ServerThread(engine, limits) as srv:`` serves on ``srv.url`` until the block ends."""

    def __init__(
        self,
        engine,
        limits: Limits,
        token: str | None = TOKEN,
        allow_origins: tuple[str, ...] = (GOOD_ORIGIN,),
        http: bool = False,
        max_batch: int = 1,
    ) -> None:
        if max_batch == 1:  # the server shuts its backend down when it stops
            backend = LocalBackend(engine, limits.max_queue)
        else:
            backend = BatchBackend(engine, max_batch, limits.max_queue)
        self.http = OpenAIServer(backend, limits, token=token, bind=False, origins=allow_origins) if http else None
        config = ServerConfig("127.0.0.1", 0, token, allow_origins, limits)
        self.server = StreamServer(backend, config, self.http.serve_socket if self.http else None)
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        await self.server.run(self.stop, lambda port: self._ready.set())

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.server.port}"

    @property
    def http_url(self) -> str:
        """The OpenAI routes' base URL: the same port as the WebSocket (``http=True``)."""
        return f"http://127.0.0.1:{self.server.port}/v1"

    def __enter__(self) -> ServerThread:
        self._thread.start()
        assert self._ready.wait(TIMEOUT_S), "the server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self._thread.join(TIMEOUT_S)
        assert not self._thread.is_alive(), "the server did not shut down"
        if self.http is not None:
            self.http.stop(drain_s=5.0)

    def finished(self, rid: Any, timeout: float = TIMEOUT_S):
        """The backend's record (its Handle) of request ``rid`` once it has ended (waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for job in list(self.server.backend.finished):
                if job.id == rid:
                    return job
            time.sleep(0.01)
        raise AssertionError(f"request {rid!r} never finished")


def client(url: str, token: str | None = TOKEN, **kwargs: Any) -> ClientConnection:
    """A connected real client; the hello message is read and checked."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    ws = connect(url, additional_headers=headers, open_timeout=TIMEOUT_S, close_timeout=5, legacy=True, **kwargs)
    hello = recv(ws)
    assert hello["type"] == "hello" and hello["protocol"] == 1, hello
    return ws


def recv(ws: ClientConnection, timeout: float = TIMEOUT_S, queued: bool = False) -> dict[str, Any]:
    """The next message; ``queued`` position notices are skipped unless ``queued`` (a request may
    wait behind another test's, and the tests that are not about the queue ignore them)."""
    deadline = time.monotonic() + timeout
    while True:
        msg = json.loads(ws.recv(timeout=max(0.01, deadline - time.monotonic())))
        if queued or msg.get("type") != "queued":
            return msg


def send(ws: ClientConnection, **msg: Any) -> None:
    ws.send(json.dumps(msg))


def generate(ws: ClientConnection, rid: Any, prompt: str, **params: Any) -> None:
    send(ws, type="generate", id=rid, prompt=prompt, **params)


def until_done(
    ws: ClientConnection, rid: Any, timeout: float = TIMEOUT_S, queued: bool = False
) -> list[dict[str, Any]]:
    """Every message for ``rid`` up to and including its done (``queued`` notices too if asked); a
    message for another id fails."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        msg = recv(ws, max(0.01, deadline - time.monotonic()), queued)
        assert msg["id"] == rid, f"expected messages for {rid!r}, got {msg}"
        out.append(msg)
        if msg["type"] in ("done", "error"):
            return out


def check_stream(msgs: list[dict[str, Any]]) -> tuple[str, list[int]]:
    """Check one request's messages are [queued...], start, steps 1..n, done (consistent); return its
    text and tokens."""
    while msgs and msgs[0]["type"] == "queued":  # position notices come before the start, never after
        assert msgs[0]["position"] >= 1, msgs[0]
        msgs = msgs[1:]
    assert msgs[0]["type"] == "start", msgs[0]
    steps = [m for m in msgs if m["type"] == "step"]
    assert [m["type"] for m in msgs] == ["start"] + ["step"] * len(steps) + ["done"]
    assert [m["step"] for m in steps] == list(range(1, len(steps) + 1))
    text = "".join(m["text"] for m in steps)
    tokens = [pc["token_id"] for m in steps for pc in m["pieces"] if pc["kind"] != "rejected"]
    assert all(m["text"] == "".join(pc["text"] for pc in m["pieces"] if pc["kind"] != "rejected") for m in steps)
    done = msgs[-1]
    assert done["text"] == text and done["tokens"] == len(tokens) == done["stats"]["emitted"]
    return text, tokens
