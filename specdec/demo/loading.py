"""A placeholder page served while ``specdec demo`` loads its model, so the URL answers at once.

Why: the page's URL answered nothing for a minute while SmolLM2 loaded and calibrated (issue 52,
item 5). This serves a small page on the demo's own address that lists the start-up phases so far
and reloads itself every 2 seconds; it closes just before the demo binds the same port, so a reload
after that reaches the demo.

Contract: ``LoadingPage(host, port)`` starts serving in a daemon thread (every path answers 200
with ``html()``); ``say(text)`` adds a phase line; ``close()`` stops it and frees the port. If the
port cannot be bound (taken), it serves nothing and ``say`` only records the lines; the demo's own
launch then reports the port.
"""

from __future__ import annotations

import html as H
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoadingPage:
    def __init__(self, host: str, port: int) -> None:
        self.lines: list[str] = []
        page = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
                body = page.html().encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        try:
            self.server: ThreadingHTTPServer | None = ThreadingHTTPServer((host, port), Handler)
        except OSError:
            self.server = None
            return
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="specdec-demo-loading", daemon=True).start()

    def say(self, text: str) -> None:
        self.lines.append(text)

    def html(self) -> str:
        items = "".join(f"<li>{H.escape(x)}</li>" for x in self.lines)
        return (
            '<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="2">'
            '<title>specdec demo: loading</title></head><body style="font-family:sans-serif;margin:2em">'
            "<h2>specdec demo is loading the model</h2><p>This page reloads itself; the demo opens here "
            f"when the model is ready.</p><ol>{items}</ol></body></html>"
        )

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
