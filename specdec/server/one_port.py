"""One listener for the WebSocket protocol and the HTTP routes (``/v1/...``) of ``specdec serve``.

Contract: ``connection_class(handoff)`` returns a subclass of websockets' ``ServerConnection`` to
pass as ``serve(create_connection=...)``. It reads each connection's first request head before
websockets parses it: a WebSocket upgrade (an ``Upgrade: websocket`` header, or a head too large or
cut short, which websockets then refuses as before) goes on to websockets unchanged; any other
request is handed over, with the bytes already read, as ``handoff(sock, address, head)``: ``sock``
is a blocking socket of its own (a duplicate of the connection's descriptor), and websockets
forgets the connection (its handler ends as for a client that left before its handshake).
``replaying(sock, head)`` wraps such a socket so that a stdlib ``socketserver`` handler reads
``head`` first, then the socket, through a ``Replay`` whose reads end at a deadline the handler
sets (``within``: ``HEAD_TIMEOUT_S`` for each request head, ``BODY_TIMEOUT_S`` for its body), so
a client that sends slowly (slowloris) or stops mid-body loses its connection instead of holding
a thread; a head on the shared port is bounded by websockets' ``open_timeout`` the same way.

Why: vLLM and most servers answer everything on one port, and clients are configured with one
URL. websockets' own ``process_request`` hook cannot serve these routes: websockets parses only
``GET`` requests (a ``POST /v1/completions`` is refused before the hook runs) and a hook answers
with one whole response, not a stream of server-sent events. Handing the socket to the existing
thread-per-request HTTP handler keeps its streaming and its keep-alive unchanged.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection

log = logging.getLogger("specdec.serve")
MAX_HEAD_BYTES = 65536  # a head longer than this goes to websockets, which refuses it
HEAD_TIMEOUT_S = 10.0  # a request head (or a WebSocket handshake) must arrive within this
BODY_TIMEOUT_S = 30.0  # a request body must arrive within this once its head has
WRITE_TIMEOUT_S = 60.0  # a reply the client does not read for this long ends the connection
Handoff = Callable[[socket.socket, Any, bytes], None]


def is_upgrade(head: bytes) -> bool:
    """Whether a request head asks for a WebSocket (``Upgrade: websocket``, any case)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"upgrade" and b"websocket" in value.lower():
            return True
    return False


def connection_class(handoff: Handoff) -> type[ServerConnection]:
    class OnePortConnection(ServerConnection):
        """websockets' connection, which first decides whether the client wants a WebSocket."""

        _mode: str | None = None  # None: reading the head; "ws"; "http": handed over
        _head = b""

        def data_received(self, data: bytes) -> None:
            if self._mode == "ws":
                return super().data_received(data)
            if self._mode == "http":
                return None
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0 and len(self._head) < MAX_HEAD_BYTES:
                return None
            if end < 0 or is_upgrade(self._head[:end]):
                return self._to_websockets()
            self._mode = "http"
            self._hand_over()
            return None

        def eof_received(self) -> None:
            if self._mode is None:  # a head cut short: websockets answers it as before
                self._to_websockets()
            if self._mode == "ws":
                super().eof_received()

        def _to_websockets(self) -> None:
            self._mode = "ws"
            head, self._head = self._head, b""
            super().data_received(head)

        def _hand_over(self) -> None:
            transport = self.transport
            transport.pause_reading()
            address = transport.get_extra_info("peername")
            sock = socket.socket(fileno=os.dup(transport.get_extra_info("socket").fileno()))
            transport.abort()  # asyncio closes its descriptor; the duplicate keeps the connection
            sock.setblocking(True)
            try:
                handoff(sock, address, self._head)
            except Exception:  # noqa: BLE001 - one connection lost, never the listener
                log.exception("handing an HTTP request over failed")
                sock.close()

    return OnePortConnection


class Replay(io.RawIOBase):
    """Reads ``head`` first, then the socket, each read before ``deadline`` (``time.monotonic()``;
    None: no limit): past it a read raises ``TimeoutError``. Between reads the socket's timeout is
    ``WRITE_TIMEOUT_S`` (a client that stops reading a reply cannot hold its thread either)."""

    def __init__(self, sock: socket.socket, head: bytes) -> None:
        self.sock, self.head = sock, head
        self.deadline: float | None = None
        sock.settimeout(WRITE_TIMEOUT_S)

    def readable(self) -> bool:
        return True

    def within(self, seconds: float | None) -> None:
        """Reads from now on must be done within ``seconds`` (None: no limit)."""
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def readinto(self, buf) -> int:
        if self.head:
            n = min(len(buf), len(self.head))
            buf[:n], self.head = self.head[:n], self.head[n:]
            return n
        if self.deadline is None:
            return self.sock.recv_into(buf)
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the client sent too slowly")
        self.sock.settimeout(left)
        try:
            return self.sock.recv_into(buf)
        finally:
            self.sock.settimeout(WRITE_TIMEOUT_S)


class Replaying:
    """A socket whose ``makefile("rb")`` replays the bytes read before the handover; everything
    else is the socket's (a stdlib request handler reads, writes, shuts it down and closes it)."""

    def __init__(self, sock: socket.socket, head: bytes) -> None:
        self._sock, self._head = sock, head

    def makefile(self, mode: str = "r", *args: Any, **kwargs: Any):
        if "r" in mode:
            head, self._head = self._head, b""
            return io.BufferedReader(Replay(self._sock, head))
        return self._sock.makefile(mode, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def replaying(sock: socket.socket, head: bytes) -> Replaying:
    return Replaying(sock, head)
