"""``/v1/completions`` and ``/v1/chat/completions`` over HTTP for ``specdec serve``: OpenAI-compatible.

Contract: ``OpenAIServer(backend, limits, host, port, token)`` serves, from a thread per request
(stdlib ``ThreadingHTTPServer``; no dependency beyond the standard library):
- ``POST /v1/completions`` (``specdec/server/openai_protocol.py``): non-streaming, one JSON reply; streaming,
  server-sent events, one ``data:`` chunk per engine step (the last one carries the finish reason),
  the usage chunk (``choices: []``) only when ``stream_options.include_usage`` asks for it, then
  ``data: [DONE]`` (``openai_replies.final_chunks``);
- ``POST /v1/chat/completions`` (``openai_chat.py``): the same path for a conversation rendered by
  the model's chat template (``chat_prompt.py``); a stream opens with the assistant's role chunk;
- ``GET /v1/models`` (the one model ``specdec``, its methods, context, limits, whether it chats)
  and ``GET /health``.
With a token every ``/v1`` request needs ``Authorization: Bearer T`` (else 401); a request from a
foreign ``Origin`` or ``Host`` is a 403, as the WebSocket handshake is (``guard.py``: loopback
origins and ``origins`` (``--allow-origin``); requests without an Origin, from scripts, pass).
Each request head must arrive within ``one_port.HEAD_TIMEOUT_S`` and its body within
``BODY_TIMEOUT_S`` (else 408 and the connection closes). Per client (``openai_admit.client_key``:
address and API key) at most ``limits.max_per_client`` requests, ``n`` counted, are queued or
running (429 ``too_many``); the reply waits until every choice started, at most
``limits.max_wait_s`` (else 503 ``queue_timeout`` with ``Retry-After``). Every refusal is an
OpenAI error object with its HTTP status (400, 401, 403, 404, 408, 413, 429, 503, 500) and the
server keeps serving. A client that disconnects mid-stream cancels its request. ``start()`` binds (port 0: any
free port, read ``port``) and serves in a daemon thread; ``stop()`` closes the socket.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from specdec.core.config import ConfigError
from specdec.server import one_port, openai_chat, openai_replies
from specdec.server import openai_protocol as oa
from specdec.server import ws_protocol as proto
from specdec.server.chat_prompt import has_chat, renderer
from specdec.server.guard import Guard
from specdec.server.one_port import Replay, Replaying, replaying
from specdec.server.openai_admit import Tenants, await_start, client_key
from specdec.server.openai_choices import ChoiceRun
from specdec.server.openai_options import seeds
from specdec.serving.backend import Busy, Request, ShuttingDown

log = logging.getLogger("specdec.openai")


class OpenAIServer:
    def __init__(
        self,
        backend,
        limits: proto.Limits,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        bind: bool = True,
        origins: tuple[str, ...] = (),
        allow_hosts: tuple[str, ...] = (),
    ):
        self.backend, self.limits, self.token, self.origins = backend, limits, token, origins
        self.guard = Guard(origins, allow_hosts, host)
        self.tenants = Tenants(limits.max_per_client)
        tokenizer = getattr(getattr(backend, "engine", None), "tokenizer", None) or getattr(backend, "tokenizer", None)
        self.vocab = len(tokenizer) if tokenizer is not None and hasattr(tokenizer, "__len__") else None
        self.tokenizer = tokenizer
        self.render = renderer(backend)
        self.active = 0  # requests being answered (a stream until its [DONE])
        self._idle = threading.Condition()
        api = self

        class Handler(_Handler):
            server_api = api

        self.httpd = ThreadingHTTPServer((host, port), Handler, bind_and_activate=bind)
        self.httpd.daemon_threads = True
        self.host, self.port, self.bound = host, self.httpd.server_address[1], bind
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> OpenAIServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="specdec-openai", daemon=True)
        self._thread.start()
        return self

    def serve_socket(self, sock, address, head: bytes = b"") -> None:
        """Answer the requests of one connection accepted elsewhere (``one_port``), in a thread of
        its own; ``head``: the bytes already read from it."""
        self.httpd.process_request(replaying(sock, head), address)

    def stop(self, drain_s: float = 0.0) -> None:
        """Stop; first wait up to ``drain_s`` for the requests being answered (their final chunks)."""
        with self._idle:
            self._idle.wait_for(lambda: self.active == 0, timeout=drain_s)
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()

    def busy(self, delta: int) -> None:
        with self._idle:
            self.active += delta
            self._idle.notify_all()

    def decode(self, ids: list[int]) -> str:
        return "" if self.tokenizer is None else self.tokenizer.decode(ids, skip_special_tokens=False)

    def token_text(self, token: int) -> str:
        return self.decode([token])

    def authorized(self, header: str) -> bool:
        if not self.token:
            return True
        given = header[7:].strip() if header[:7].lower() == "bearer " else ""
        return hmac.compare_digest(given.encode(), self.token.encode())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_api: OpenAIServer

    def log_message(self, fmt, *args) -> None:  # route through logging, not stderr
        log.debug("%s " + fmt, self.address_string(), *args)

    # -- plumbing -------------------------------------------------------------------------------------
    def _json(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, allow_nan=False).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, e: oa.ApiError) -> None:
        retry = getattr(e, "retry_after", self.server_api.limits.retry_after_s)
        wait = {"Retry-After": str(retry)} if e.status in (429, 503) else None
        self._json(e.status, e.body(), wait)

    def setup(self) -> None:
        if not isinstance(self.request, Replaying):  # a socket of the own port: reads under deadlines too
            self.request = replaying(self.request, b"")
        super().setup()
        self.reader: Replay = self.rfile.raw

    def handle_one_request(self) -> None:
        self.reader.within(one_port.HEAD_TIMEOUT_S)  # the request line and headers (also the wait for them)
        super().handle_one_request()

    def _check_auth(self) -> bool:
        reason = self.server_api.guard.refusal(self.headers)  # the WebSocket handshake's check (guard.py)
        if reason is not None:
            self._error(oa.error("forbidden", reason))
            return False
        if self.server_api.authorized(self.headers.get("Authorization", "")):
            return True
        self._error(oa.error("unauthorized", "a valid token is required: Authorization: Bearer <token>"))
        return False

    def _body(self) -> bytes:
        length = (self.headers.get("Content-Length") or "0").strip()
        if not length.isdigit():  # int() would raise (no reply) and a negative size reads until EOF
            self.close_connection = True
            raise oa.error("bad_message", f"Content-Length must be a byte count, got {length!r}")
        size = int(length)
        if size > self.server_api.limits.max_message_bytes:
            self.close_connection = True  # the body is not read: this connection cannot be reused
            raise oa.error(
                "too_large",
                f"the request body is {size} bytes; the limit is {self.server_api.limits.max_message_bytes}",
            )
        self.reader.within(one_port.BODY_TIMEOUT_S)
        try:
            body = self.rfile.read(size)
        except TimeoutError:
            self.close_connection = True
            raise oa.error("timeout", f"the request body did not arrive within {one_port.BODY_TIMEOUT_S:g} s") from None
        finally:
            self.reader.within(None)
        if len(body) < size:  # the client closed mid-body
            self.close_connection = True
            raise oa.error("bad_message", f"the body ended after {len(body)} of {size} bytes")
        return body

    # -- routes ---------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        api = self.server_api
        if self.path == "/health":
            return self._json(200, {"status": "ok"})
        if not self._check_auth():
            return
        if self.path == "/v1/models":
            methods, context = tuple(api.backend.methods), api.backend.limits.context
            return self._json(200, openai_replies.models(methods, context, api.limits, has_chat(api.backend)))
        self._error(oa.error("not_found", f"no route {self.path}"))

    def do_POST(self) -> None:
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            self.close_connection = True
            return self._error(oa.error("not_found", f"no route {self.path}"))
        if not self._check_auth():
            self.close_connection = True
            return
        api = self.server_api
        key = client_key(self.client_address, self.headers.get("Authorization", ""))
        try:
            req = self._parse(self._body())
            api.tenants.take(key, req.options.n)  # per client: queued + running, and n
        except oa.ApiError as e:
            return self._error(e)
        try:
            self._answer(req, key)
        finally:
            api.tenants.give(key, req.options.n)

    def _answer(self, req: oa.Completion, key: str) -> None:
        api = self.server_api
        try:
            runs = self._submit(req, key)
            refused = await_start(api.backend, [run.handle for run in runs], api.limits)
            if refused is not None:
                raise refused
        except oa.ApiError as e:
            return self._error(e)
        except Busy as e:
            return self._error(oa.error("busy", str(e)))
        except ShuttingDown as e:
            return self._error(oa.error("shutting_down", str(e)))
        except ConfigError as e:
            return self._error(oa.error("bad_params", str(e)))
        api.busy(+1)
        try:
            (self._stream if req.stream else self._whole)(req, runs)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            _cancel(runs)
        except Exception:  # a bug must cost one request, not the server
            log.exception("request %s failed", req.id)
            _cancel(runs)
            raise
        finally:
            api.busy(-1)

    def _parse(self, raw: bytes) -> oa.Completion:
        api = self.server_api
        methods, encode = tuple(api.backend.methods), api.backend.encode
        if self.path == "/v1/chat/completions":
            return openai_chat.parse(raw, api.limits, methods, encode, api.render)
        return oa.parse(raw, api.limits, methods, encode, api.vocab, api.decode)

    def _submit(self, req: oa.Completion, client: str) -> list[ChoiceRun]:
        """One backend request per choice (``n``; sample i seeded ``seed + i``); all or none."""
        api, runs = self.server_api, []
        offset = len(req.prompt_text) if req.options.echo else 0
        try:
            for i, seed in enumerate(seeds(req.spec.sampling.seed, req.options.n)):
                spec = replace(req.spec, sampling=replace(req.spec.sampling, seed=seed))
                rid = f"{req.id}-{i}" if i else req.id
                handle = api.backend.submit(Request(req.prompt_ids, spec, id=rid, client=client))
                runs.append(ChoiceRun(i, handle, req.options, api.backend.cancel, api.token_text, offset))
        except Exception:
            _cancel(runs)
            raise
        return runs

    def _whole(self, req: oa.Completion, runs: list[ChoiceRun]) -> None:
        steps = [[part.event for part in run.parts() if part.event is not None] for run in runs]
        failed = next((r.handle.error for r in runs if r.handle.error is not None), None)
        if failed is not None:
            return self._error(oa.engine_failure(failed))
        self._json(200, openai_replies.response(req, runs, steps))

    def _stream(self, req: oa.Completion, runs: list[ChoiceRun]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for run in runs:
            if req.chat:
                self._event(openai_replies.role_chunk(req, run.index))
            elif req.options.echo:
                self._event(openai_replies.echo_chunk(req, run.index))
            for part in run.parts():
                self._event(openai_replies.chunk(req, run, part))
            if run.handle.error is not None:
                self._event(oa.engine_failure(run.handle.error).body())
        if req.include_usage:
            self._event(openai_replies.usage_chunk(req, runs))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, body: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(body, separators=(",", ":"), allow_nan=False).encode() + b"\n\n")
        self.wfile.flush()


def _cancel(runs: list[ChoiceRun]) -> None:
    for run in runs:
        run.handle.cancel()
