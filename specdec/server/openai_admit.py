"""Who may start what on the HTTP routes: per-client limits, and the bound on a request's wait.

Contract (no torch, no sockets):
- ``client_key(address, authorization)``: who sent an HTTP request: its peer address and the
  bearer key it presented (hashed, never kept in the clear); two openai clients with different
  API keys on one machine are two clients, every request of one key from one address is one.
- ``Tenants(cap)``: ``take(key, n)`` counts ``n`` more queued-or-running requests for ``key`` or
  raises the 429 ``too_many`` ``ApiError`` when that would pass ``cap``
  (``Limits.max_per_client``; an ``n`` above ``cap`` is a 400 naming ``n``); ``give(key, n)`` when
  they are answered. Thread-safe.
- ``await_start(backend, handles, limits)``: block until every handle began decoding (or ended);
  None, or the 503 ``queue_timeout`` ``ApiError`` (its ``retry_after``: seconds) once it is plain
  they cannot start within ``limits.max_wait_s``: at once when the backend's estimate of the
  wait is longer, else when the bound passes. The handles still queued are withdrawn (they never
  run) and the others cancelled: a request's choices start together or not at all. A backend
  without ``withdraw`` (a remote server) is waited for without a bound.
Why: one HTTP client with ``n: 128`` or a loop of requests took the whole queue, and a queued
request waited silently for minutes (issue 51); a refusal with ``Retry-After`` lets it come back.
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

from specdec.server import openai_protocol as oa
from specdec.server import ws_protocol as proto


def client_key(address: Any, authorization: str) -> str:
    host = address[0] if isinstance(address, tuple) and address else str(address)
    key = hashlib.sha256(authorization.encode()).hexdigest()[:12] if authorization else "-"
    return f"http-{host}-{key}"


class Tenants:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, key: str, n: int) -> None:
        if n > self.cap:  # can never be served: a 400, not a retry
            raise oa.error("bad_params", f"n is {n}; at most {self.cap} (limits.max_per_client)", "n")
        with self._lock:
            have = self._counts.get(key, 0)
            if have + n > self.cap:
                raise oa.error(
                    "too_many",
                    f"this client has {have} requests queued or running and asks {n} more; the limit is {self.cap} "
                    "(limits.max_per_client)",
                )
            self._counts[key] = have + n

    def give(self, key: str, n: int) -> None:
        with self._lock:
            left = self._counts.get(key, 0) - n
            if left > 0:
                self._counts[key] = left
            else:
                self._counts.pop(key, None)


def await_start(backend: Any, handles: list, limits: proto.Limits) -> oa.ApiError | None:
    withdraw = getattr(backend, "withdraw", None)
    if withdraw is None:
        return None
    estimates = [e for e in (backend.estimate_s(h) for h in handles) if e is not None]
    estimate = max(estimates, default=None)
    if estimate is not None and estimate > limits.max_wait_s:
        why = f"it would wait about {estimate:.0f} s to start"
    else:
        deadline = time.monotonic() + limits.max_wait_s
        for handle in handles:
            handle.wait_begun(max(0.0, deadline - time.monotonic()))
        if all(h.started() is not None for h in handles):
            return None
        why, estimate = "it was not started", max((backend.estimate_s(h) or 0.0 for h in handles), default=None)
    withdrawn = [withdraw(h, "queue_timeout") for h in handles]
    if not any(withdrawn):  # every one started meanwhile
        return None
    for handle in handles:
        handle.cancel()
    err = oa.error("queue_timeout", f"{why} within {limits.max_wait_s:g} s (limits.max_wait_s); retry later")
    err.retry_after = proto.retry_after(estimate, limits.retry_after_s)
    return err
