"""The WebSocket streaming server: connections, auth and origin checks, graceful shutdown.

Contract: ``StreamServer(backend, config).run(stop)`` serves protocol version 1
(docs/websocket.md, built by ``specdec.server.ws_protocol``) from any ``specdec.serving.backend.Backend`` until
``stop`` is set, then shuts down gracefully: no new requests, the running one and the queued ones
end with ``done`` and stop ``shutdown`` (the server shuts its backend down), outgoing messages are
flushed (bounded wait), and connections close with 1001. Each request's handle delivers to a
``Relay`` by callback on the event loop (``Handle.listen``), which posts start, step..., done to a
per-connection outbox that one task sends in order; the backend's queue decides who decodes when.
With a token, a connection must present it (``Authorization: Bearer T`` or ``?token=T``) or it
gets an ``unauthorized`` error and a close with 1008 (policy violation). The handshake of a
foreign ``Origin`` or ``Host`` is refused with HTTP 403 (``guard.py``: loopback origins, and those
of ``allow_origins``; clients that send no Origin are allowed); a handshake (or an HTTP request
head) not complete within ``HEAD_TIMEOUT_S`` is dropped.
With ``http`` set, plain HTTP requests on the same port go there (``one_port.py``).
A connection is one client to the backend's fair queue (``Request.client``): it may have
``limits.max_per_client`` requests queued or running (one more: ``too_many``); a request still
waiting ``QUEUED_NOTICE_S`` after it arrived hears its position (``queued``), again every
``limits.queue_update_s``; one that cannot start within ``limits.max_wait_s`` (or, by the
backend's estimate, would not) is withdrawn from the queue and ends with a ``queue_timeout`` error
carrying ``retry_after_s`` instead of a ``done``. A client that goes away cancels its requests; a
bad message gets an ``error`` and the connection stays open. A ``generate`` may carry chat
``messages`` instead of a ``prompt``: the backend's chat template renders them (``chat_prompt.py``)
and ``hello.chat`` says whether it has one.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request as HTTPRequest
from websockets.protocol import State

from specdec.core.config import ConfigError
from specdec.server import one_port
from specdec.server import ws_protocol as proto
from specdec.server.chat_prompt import has_chat, renderer
from specdec.server.guard import Guard
from specdec.server.one_port import Handoff, connection_class
from specdec.serving.backend import Busy, Handle, Request, ShuttingDown

log = logging.getLogger("specdec.serve")
HARD_SIZE_FACTOR = 4  # frames above this many times max_message_bytes close the connection (1009)
FLUSH_TIMEOUT_S = 5.0
QUEUED_NOTICE_S = 0.5  # a request still waiting this long after it arrived hears its position
WRITE_BUFFER_LIMIT = 2**15  # bytes waiting in the socket buffer before messages wait for the pump


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    allow_origins: tuple[str, ...] = ()  # beyond loopback origins (guard.py); "*": any
    limits: proto.Limits = proto.Limits()
    allow_hosts: tuple[str, ...] = ()  # Host names beyond loopback, IP literals and the bind host (guard.py)


def authorized(request: HTTPRequest, token: str | None) -> bool:
    """True if no token is configured, or the request carries it as a Bearer header or ?token=."""
    if not token:
        return True
    presented = parse_qs(urlsplit(request.path).query).get("token", [])
    header = request.headers.get("Authorization", "")
    if header[:7].lower() == "bearer ":
        presented.append(header[7:].strip())
    return any(hmac.compare_digest(p.encode(), token.encode()) for p in presented)


class Client:
    """One connection: its outbox (filled on the event loop by ``post``) and its live requests by id.

    A message goes out at once, in the event-loop callback that receives it, when nothing is queued
    before it and the socket's write buffer is small; otherwise the ``pump`` task sends it with
    websockets' flow control. Saving the extra loop iteration per step matters: each iteration
    takes the GIL from the engine thread again."""

    def __init__(self, ws: ServerConnection, loop: asyncio.AbstractEventLoop, key: str = "ws") -> None:
        self.ws, self.loop, self.key = ws, loop, key  # key: who it is to the fair queue
        self.outbox: asyncio.Queue[str] = asyncio.Queue()
        self.jobs: dict[proto.RequestId, Handle] = {}
        self.open = True
        self._pumping = False

    def post(self, msg: dict[str, Any]) -> None:
        text = proto.dumps(msg)
        if msg["type"] == "done":
            self.jobs.pop(msg["id"], None)
        if not self.open:
            return
        if not self._pumping and self.outbox.empty() and self._send_now(text):
            return
        self.outbox.put_nowait(text)

    def _send_now(self, text: str) -> bool:
        """Write one text frame without awaiting, if the connection is open and not backed up."""
        ws = self.ws
        transport = getattr(ws, "transport", None)
        if (
            ws.protocol.state is not State.OPEN
            or transport is None
            or transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT
        ):
            return False
        ws.protocol.send_text(text.encode())
        ws.send_data()
        return True

    async def pump(self) -> None:
        while True:
            text = await self.outbox.get()
            self._pumping = True
            try:
                await self.ws.send(text)
            except ConnectionClosed:
                self.open = False
            finally:
                self._pumping = False
                self.outbox.task_done()

    async def flushed(self) -> None:
        await self.outbox.join()


class StreamServer:
    """``http``: where other HTTP requests on the same port go (``one_port.Handoff``, e.g.
    ``OpenAIServer.serve_socket``); None answers them as websockets does (426)."""

    def __init__(self, backend, config: ServerConfig = ServerConfig(), http: Handoff | None = None) -> None:
        self.backend, self.config, self.http = backend, config, http
        self.limits = config.limits
        self.methods = tuple(backend.methods)
        self.encode = backend.encode
        self.render = renderer(backend)
        self.clients: set[Client] = set()
        self.relays: set[asyncio.Future] = set()  # one per request until its done is posted
        self.port: int | None = None
        self.connections = 0
        self.guard = Guard(config.allow_origins, config.allow_hosts, config.host)

    async def run(self, stop: asyncio.Event, ready: Callable[[int], None] | None = None) -> None:
        """Serve until ``stop`` is set, then shut down gracefully; ``ready(port)`` once listening."""
        async with serve(
            self.handler,
            self.config.host,
            self.config.port,
            process_request=self._guard,
            open_timeout=one_port.HEAD_TIMEOUT_S,
            max_size=HARD_SIZE_FACTOR * self.limits.max_message_bytes,
            compression=None,
            create_connection=connection_class(self.http) if self.http is not None else None,
        ) as server:
            self.port = next(iter(server.sockets)).getsockname()[1]
            if ready is not None:
                ready(self.port)
            ticker = asyncio.create_task(self._tell_positions())
            await stop.wait()
            ticker.cancel()
            await self._shutdown()

    async def _tell_positions(self) -> None:
        """Every ``limits.queue_update_s``: each queued request hears its position again."""
        while True:
            await asyncio.sleep(self.limits.queue_update_s)
            for client in list(self.clients):
                for rid, handle in list(client.jobs.items()):
                    self._tell_position(client, rid, handle)

    def _tell_position(self, client: Client, rid: proto.RequestId, handle: Handle) -> None:
        """Post a ``queued`` message if ``handle`` still waits in the backend's queue."""
        position = getattr(self.backend, "position", None)
        where = position(handle) if position is not None else None
        if where is not None and client.jobs.get(rid) is handle:
            client.post(proto.queued(rid, where, self.backend.estimate_s(handle)))

    def _guard(self, connection: ServerConnection, request: HTTPRequest):
        """Refuse a handshake from a foreign Origin or Host (403), before any message is exchanged."""
        reason = self.guard.refusal(request.headers)
        if reason is None:
            return None
        log.warning("refused a WebSocket handshake: %s", reason)
        return connection.respond(403, reason + "\n")

    async def _shutdown(self) -> None:
        log.info("shutting down: ending running and queued requests")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.backend.shutdown, 60.0)
        if self.relays:  # every request's done message is posted
            await asyncio.wait(list(self.relays), timeout=FLUSH_TIMEOUT_S)
        if self.clients:
            await asyncio.wait([asyncio.ensure_future(c.flushed()) for c in self.clients], timeout=FLUSH_TIMEOUT_S)

    async def handler(self, ws: ServerConnection) -> None:
        self.connections += 1
        client = Client(ws, asyncio.get_running_loop(), f"ws-{self.connections}")
        if not authorized(ws.request, self.config.token):
            await ws.send(proto.dumps(proto.error(None, "unauthorized", proto.ERROR_CODES["unauthorized"])))
            await ws.close(1008, "unauthorized")
            return
        self.clients.add(client)
        pump = asyncio.create_task(client.pump())
        chat = has_chat(self.backend)
        client.post(proto.hello(self.methods, self.backend.limits.context, self.limits, bool(self.config.token), chat))
        try:
            async for raw in ws:
                self.on_message(client, raw)
        except ConnectionClosed:
            pass
        finally:
            client.open = False
            for handle in list(client.jobs.values()):
                self.backend.cancel(handle, "cancelled")
            self.clients.discard(client)
            pump.cancel()

    def on_message(self, client: Client, raw: str | bytes) -> None:
        try:
            msg = proto.parse(raw, self.limits, self.methods, self.encode, self.render)
            if isinstance(msg, proto.Cancel):
                self._cancel(client, msg)
            else:
                self._submit(client, msg)
        except proto.ProtocolError as e:
            wait = self.limits.retry_after_s if e.code in ("busy", "too_many") else None
            client.post(proto.error(e.id, e.code, e.message, wait))
        except Exception as e:  # a bug must cost one request, not the server
            log.exception("unexpected error handling a message")
            client.post(proto.error(None, "internal", f"{type(e).__name__}: {e}"))

    def _cancel(self, client: Client, msg: proto.Cancel) -> None:
        handle = client.jobs.get(msg.id)
        if handle is None:
            raise proto.ProtocolError(
                "unknown_id",
                f"no request {msg.id!r} is queued or running on this connection (it may have finished already)",
                msg.id,
            )
        self.backend.cancel(handle, "cancelled")

    def _submit(self, client: Client, msg: proto.Generate) -> None:
        if msg.id in client.jobs:
            raise proto.ProtocolError(
                "duplicate_id",
                f"request {msg.id!r} is already queued or running on this connection; use a new id",
                msg.id,
            )
        cap = self.limits.max_per_client
        if len(client.jobs) >= cap:
            raise proto.ProtocolError(
                "too_many", f"this connection already has {cap} requests queued or running (the limit)", msg.id
            )
        try:
            handle = self.backend.submit(Request(msg.prompt_ids, msg.spec, id=msg.id, client=client.key))
        except Busy as e:
            raise proto.ProtocolError("busy", str(e), msg.id) from None
        except ShuttingDown as e:
            raise proto.ProtocolError("shutting_down", str(e), msg.id) from None
        except ConfigError as e:
            raise proto.ProtocolError("bad_params", str(e), msg.id) from None
        client.jobs[msg.id] = handle
        loop = asyncio.get_running_loop()
        relay = Relay(client, msg, handle, loop.create_future())
        self.relays.add(relay.done)
        relay.done.add_done_callback(self.relays.discard)
        handle.listen(loop, relay)
        if getattr(self.backend, "withdraw", None) is None:  # a remote backend: no positions, no bound
            return
        estimate = self.backend.estimate_s(handle)
        if estimate is not None and estimate > self.limits.max_wait_s:  # refused early: it would wait too long
            self._refuse(relay, f"it would wait about {estimate:.0f} s to start")
            return
        loop.call_later(QUEUED_NOTICE_S, self._tell_position, client, msg.id, handle)
        loop.call_later(self.limits.max_wait_s, self._refuse, relay, "it was not started")

    def _refuse(self, relay: Relay, why: str) -> None:
        """Withdraw a request that is still queued: its relay then ends it with ``queue_timeout``."""
        limit = self.limits.max_wait_s
        retry = proto.retry_after(self.backend.estimate_s(relay.handle), self.limits.retry_after_s)
        relay.refusal = (f"{why} within {limit:g} s (limits.max_wait_s); retry later", retry)
        if not self.backend.withdraw(relay.handle, "queue_timeout"):
            relay.refusal = None


class Relay:
    """One request's messages: start, one step per event, then exactly one done (also for a request
    that never started). Called on the event loop by the handle's listener, so each step costs the
    loop one callback and the message is written at once when the socket is not backed up."""

    def __init__(self, client: Client, msg: proto.Generate, handle: Handle, done: asyncio.Future) -> None:
        self.client, self.msg, self.handle, self.done = client, msg, handle, done
        self.refusal: tuple[str, int] | None = None  # why it was withdrawn from the queue, when to retry
        self.texts: list[str] = []
        self.tokens, self.stats = 0, None

    def __call__(self, kind: str, ev) -> None:
        msg, client = self.msg, self.client
        if kind == "start":
            client.post(proto.start(msg, 1000 * (self.handle.queued_s or 0.0)))
        elif kind == "event":
            client.post(proto.step(msg.id, ev))
            self.texts.append(ev.text)
            self.tokens += len(ev.token_ids)
            self.stats = ev.stats
        else:
            self._end()

    def _end(self) -> None:
        handle, msg = self.handle, self.msg
        if handle.stop == "queue_timeout" and self.refusal is not None:  # never started: an error ends it
            message, retry = self.refusal
            self.client.jobs.pop(msg.id, None)
            self.client.post(proto.error(msg.id, "queue_timeout", message, retry))
            log.info("request %r refused: %s", msg.id, message)
            if not self.done.done():
                self.done.set_result(None)
            return
        if handle.error is not None:  # an engine failure ends this request, never the server
            e = handle.error
            log.error("request %r failed: %s: %s", msg.id, type(e).__name__, e)
            self.client.post(proto.error(msg.id, "internal", f"the engine failed: {type(e).__name__}: {e}"))
        stop = handle.stop if handle.stop in proto.STOP_REASONS else "error"
        self.client.post(proto.done(msg.id, stop, "".join(self.texts), self.tokens, self.stats))
        log.info("request %r: %s, %d tokens in %d steps", msg.id, stop, self.tokens, handle.steps)
        if not self.done.done():
            self.done.set_result(None)
