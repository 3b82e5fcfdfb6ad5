"""`specdec lsp --tcp HOST:PORT`: a raw JSON-RPC client over a loopback socket gets a completion."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow


def send(sock: socket.socket, msg: dict) -> None:
    body = json.dumps(msg).encode("utf-8")
    sock.sendall(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))


def receive(f) -> dict:
    length = 0
    while line := f.readline().strip():
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(f.read(length))


def reply(f, msg_id: int) -> dict:
    while True:
        msg = receive(f)
        if msg.get("id") == msg_id:
            return msg


def test_tcp_transport_serves_completions():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "specdec", "lsp", "--tcp", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=120)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
                time.sleep(0.2)
        with sock, sock.makefile("rb") as f:
            send(
                sock,
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "processId": None,
                        "rootUri": None,
                        "capabilities": {},
                        "initializationOptions": {
                            "min_confidence": 0,
                            "wait_for_model": True,
                        },  # transport, not the filter
                    },
                },
            )
            assert "completionProvider" in reply(f, 1)["result"]["capabilities"]
            send(sock, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
            text = "def add(a, b):\n    return a"
            send(
                sock,
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didOpen",
                    "params": {
                        "textDocument": {"uri": "file:///t.py", "languageId": "python", "version": 1, "text": text}
                    },
                },
            )
            send(
                sock,
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "textDocument/completion",
                    "params": {"textDocument": {"uri": "file:///t.py"}, "position": {"line": 1, "character": 12}},
                },
            )
            items = reply(f, 2)["result"]["items"]
            assert len(items) == 1 and items[0]["insertText"]
            send(sock, {"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": None})
            assert "error" not in reply(f, 3)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
