"""``specdec serve`` is safe by default (issue 51): a foreign ``Origin`` or ``Host`` is refused on
the WebSocket handshake (403) and on the HTTP routes (403 ``forbidden``), a cross-origin
``text/plain`` POST included; loopback origins and clients without an Origin (the openai client)
are served; a request head or body that stalls loses its connection within the timeouts instead of
holding a server thread (50 at once: every handler thread ends); ``specdec serve``'s flags widen
the lists. Real servers on loopback, real clients (websockets, the official openai client, raw
sockets); every wait is bounded."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest
from websockets.exceptions import InvalidStatus

from specdec.server import one_port
from specdec.server.guard import Guard
from specdec.server.ws_protocol import Limits
from tests.serve_helpers import TIMEOUT_S, ServerThread, client, generate, until_done

openai = pytest.importorskip("openai", reason="the openai client comes with the test extras (pip install -e .[test])")


# -- the allow-list itself (pure) ------------------------------------------------------------------
@pytest.mark.parametrize(
    "headers, allowed",
    [
        ({}, True),  # a script: no Origin, no Host
        ({"Host": "127.0.0.1:8765"}, True),
        ({"Host": "localhost:8765", "Origin": "http://localhost:3000"}, True),
        ({"Host": "[::1]:8765", "Origin": "http://[::1]:9"}, True),
        ({"Origin": "https://127.0.0.1"}, True),
        ({"Host": "10.1.2.3:8765"}, True),  # an IP literal cannot be a rebinding name
        ({"Origin": "http://evil.example"}, False),
        ({"Origin": "null"}, False),  # a file:// page or a sandboxed frame
        ({"Origin": "http://localhost.evil.example"}, False),
        ({"Host": "evil.example:8765"}, False),  # DNS rebinding
        ({"Host": "127.0.0.1:notaport"}, False),
        ({"Sec-Fetch-Site": "cross-site"}, False),
        ({"Origin": "http://good.example/", "Host": "good.example"}, True),  # the allowed origin's host too
        ({"Host": "my.lan"}, True),
    ],
)
def test_the_allow_list(headers, allowed) -> None:
    guard = Guard(("http://Good.example",), ("my.lan",))
    assert (guard.refusal(headers) is None) == allowed, guard.refusal(headers)


def test_a_star_allows_every_origin_but_not_every_host() -> None:
    guard = Guard(("*",))
    assert guard.refusal({"Origin": "http://anything.example"}) is None
    assert guard.refusal({"Host": "anything.example"}) is not None


# -- end to end ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def srv(engine):
    with ServerThread(engine, Limits(max_queue=8), token=None, allow_origins=(), http=True) as s:
        yield s


def _post(srv, headers: dict[str, str], body: bytes, path: str = "/v1/completions") -> tuple[int, dict]:
    """A raw HTTP/1.1 POST (so that Host and Origin are exactly what a browser would send)."""
    port = srv.server.port
    head = [f"POST {path} HTTP/1.1", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
        s.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.split(b"\r\n\r\n", 1)[1] or b"{}")


BODY = json.dumps({"model": "specdec", "prompt": "x = 1", "max_tokens": 2, "temperature": 0}).encode()


def test_a_foreign_origin_is_refused_on_the_websocket(srv) -> None:
    with pytest.raises(InvalidStatus) as e:
        client(srv.url, token=None, origin="http://evil.example")
    assert e.value.response.status_code == 403
    assert b"--allow-origin" in e.value.response.body
    with client(srv.url, token=None, origin=f"http://localhost:{srv.server.port}") as ws:  # loopback: allowed
        generate(ws, "a", "x = ", method="none", max_new_tokens=2)
        assert until_done(ws, "a")[-1]["type"] == "done"


def _handshake(srv, host: str) -> bytes:
    """A raw WebSocket opening handshake naming ``host``; the server's reply head."""
    head = (
        f"GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", srv.server.port), timeout=TIMEOUT_S) as s:
        s.sendall(head.encode())
        data = b""
        while b"\r\n\r\n" not in data and (chunk := s.recv(65536)):
            data += chunk
    return data


def test_a_foreign_host_is_refused_on_the_websocket(srv) -> None:
    assert _handshake(srv, "rebind.evil.example:80").startswith(b"HTTP/1.1 403")
    assert _handshake(srv, f"localhost:{srv.server.port}").startswith(b"HTTP/1.1 101")


def test_a_cross_origin_text_plain_post_is_refused(srv) -> None:
    host = f"127.0.0.1:{srv.server.port}"
    headers = {"Host": host, "Origin": "http://evil.example", "Content-Type": "text/plain"}
    status, body = _post(srv, headers, BODY)
    assert status == 403 and body["error"]["code"] == "forbidden" and "evil.example" in body["error"]["message"]
    status, body = _post(srv, {"Host": "rebind.evil.example", "Content-Type": "text/plain"}, BODY)
    assert status == 403 and "Host" in body["error"]["message"]
    status, body = _post(srv, {"Host": host, "Origin": f"http://{host}", "Content-Type": "text/plain"}, BODY)
    assert status == 200 and body["choices"][0]["finish_reason"] == "length"


def test_the_openai_client_sends_no_origin_and_is_served(srv) -> None:
    api = openai.OpenAI(base_url=srv.http_url, api_key="x", max_retries=0, timeout=TIMEOUT_S)
    r = api.completions.create(model="specdec", prompt="x = 1", max_tokens=2, temperature=0)
    assert r.choices[0].finish_reason == "length"


def _closed_within(sock: socket.socket, seconds: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    t0, data = time.monotonic(), b""
    sock.settimeout(seconds)
    while chunk := sock.recv(65536):
        data += chunk
    return data, time.monotonic() - t0


def test_a_stalled_head_or_body_loses_its_connection(srv, monkeypatch) -> None:
    monkeypatch.setattr(one_port, "BODY_TIMEOUT_S", 1.5)
    monkeypatch.setattr(one_port, "HEAD_TIMEOUT_S", 1.5)  # read per request on the HTTP side
    port = srv.server.port
    # the body: headers complete, then 10 of 100 bytes, then nothing
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n" + BODY[:10])
        data, took = _closed_within(s, 20)
    assert data.startswith(b"HTTP/1.1 408") and b"did not arrive" in data, data
    assert took < 10
    # a keep-alive connection that sends the next head too slowly (one byte every 0.5 s)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200")
        t0, closed = time.monotonic(), False
        for byte in b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n":
            try:
                s.sendall(bytes([byte]))
                time.sleep(0.5)
                if s.recv(1, socket.MSG_DONTWAIT) == b"":
                    closed = True
                    break
            except BlockingIOError:
                continue
            except OSError:
                closed = True
                break
        assert closed and time.monotonic() - t0 < 10


def test_a_stalled_first_head_on_the_shared_port_is_dropped(engine, monkeypatch) -> None:
    monkeypatch.setattr(one_port, "HEAD_TIMEOUT_S", 1.5)  # websockets' open_timeout, read at start
    with ServerThread(engine, Limits(), token=None, allow_origins=(), http=True) as s:
        for start in (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"GET / HTTP/1.1\r\n"):
            with socket.create_connection(("127.0.0.1", s.server.port), timeout=TIMEOUT_S) as sock:
                sock.sendall(start)
                data, took = _closed_within(sock, 20)
            assert took < 10 and not data.startswith(b"HTTP/1.1 200"), data


def test_fifty_stalled_bodies_hold_no_thread_after_the_timeout(srv, monkeypatch) -> None:
    monkeypatch.setattr(one_port, "BODY_TIMEOUT_S", 1.5)
    before = threading.active_count()
    head = b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"
    socks = [socket.create_connection(("127.0.0.1", srv.server.port), timeout=TIMEOUT_S) for _ in range(50)]
    for s in socks:
        s.sendall(head)
    try:
        replies = [_closed_within(s, 30)[0] for s in socks]
    finally:
        for s in socks:
            s.close()
    assert all(r.startswith(b"HTTP/1.1 408") for r in replies)
    deadline = time.monotonic() + 10
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before  # every handler thread has ended


def test_the_serve_command_wires_the_new_flags() -> None:
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "specdec", "serve", "--port", "0", "--max-per-client", "3", "--max-wait", "7"]
    proc = subprocess.Popen(
        cmd + ["--allow-origin", "http://app.example", "--allow-host", "box.lan"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        url = re.search(r"ws://\S+", proc.stdout.readline()).group(0)
        port = int(url.rsplit(":", 1)[1])
        with client(url, token=None, origin="http://app.example") as ws:  # allowed by the flag
            ws.send(json.dumps({"type": "generate", "id": 1, "prompt": "x", "max_new_tokens": 1}))
            assert until_done(ws, 1)[-1]["type"] == "done"
        with pytest.raises(InvalidStatus):
            client(url, token=None, origin="http://other.example")
        limits = json.loads(_get(port, "/v1/models", {"Host": "box.lan:1", "Origin": "http://localhost:3000"}))["data"][
            0
        ]["specdec"]["limits"]
        assert (limits["max_per_client"], limits["max_wait_s"]) == (3, 7.0)
        assert _get(port, "/v1/models", {"Host": "other.lan"}).startswith('{"error"')
    finally:
        proc.terminate()
        assert proc.wait(60) == 0


def _get(port: int, path: str, headers: dict[str, str]) -> str:
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\n{head}Connection: close\r\n\r\n".encode())
        data, _ = _closed_within(s, TIMEOUT_S)
    return data.split(b"\r\n\r\n", 1)[1].decode()
