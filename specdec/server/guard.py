"""Which web pages and which host names may use ``specdec serve``: the Origin and Host checks.

Contract: ``Guard(allow_origins, allow_hosts, bind_host)``; ``guard.refusal(headers)`` returns None
for a request that may go on, else the reason to refuse it (the WebSocket handshake answers 403,
an HTTP route a 403 ``forbidden`` error object). ``headers`` is anything with ``get(name)``.
- ``Origin``: absent passes (scripts, curl, the openai client send none); a loopback origin
  (``http(s)://127.0.0.1``, ``localhost``, ``[::1]``, any port) passes; so does one listed in
  ``allow_origins`` (``--allow-origin``, compared without case and without a trailing slash; ``*``
  allows every origin); anything else (another site, ``null`` from a ``file://`` page or a
  sandboxed frame) is refused. A request without ``Origin`` but with ``Sec-Fetch-Site:
  cross-site`` (a browser's cross-site request) is refused too.
- ``Host``: absent passes (HTTP/1.0 scripts); an IP literal passes (a page can only reach the
  server by its address from the server's own origin); so do ``localhost`` (and ``*.localhost``),
  the host the server binds, the host of each allowed origin and each ``allow_hosts`` entry
  (``--allow-host``). Any other name is refused: that is what DNS rebinding would send.
Why: a server on 127.0.0.1 is reachable from every page the user's browser opens. A WebSocket and
a ``text/plain`` POST need no CORS preflight, so without these checks any site could use the model
and read its output; with a rebinding DNS name it could even pass as same-origin. Non-browser
clients send no ``Origin`` and a truthful ``Host``, so they are unaffected.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class Guard:
    def __init__(
        self, allow_origins: tuple[str, ...] = (), allow_hosts: tuple[str, ...] = (), bind_host: str = "127.0.0.1"
    ) -> None:
        self.any_origin = "*" in allow_origins
        self.origins = frozenset(_norm_origin(o) for o in allow_origins if o != "*")
        hosts = {h.lower().strip("[]") for h in allow_hosts if h}
        hosts.update(_origin_host(o) for o in self.origins)
        if bind_host and bind_host not in ("0.0.0.0", "::", ""):
            hosts.add(bind_host.lower().strip("[]"))
        self.hosts = frozenset(h for h in hosts if h)

    def refusal(self, headers) -> str | None:
        origin = headers.get("Origin")
        if origin is not None and not self.origin_ok(origin):
            return f"the Origin {origin!r} is not allowed; start the server with --allow-origin {origin} to allow it"
        if origin is None and (headers.get("Sec-Fetch-Site") or "").lower() == "cross-site":
            return "a cross-site browser request without an Origin is not allowed"
        host = headers.get("Host")
        if host is not None and not self.host_ok(host):
            name = host_name(host)
            return f"the Host {host!r} is not allowed; start the server with --allow-host {name} to allow it"
        return None

    def origin_ok(self, origin: str) -> bool:
        norm = _norm_origin(origin)
        return self.any_origin or norm in self.origins or _origin_host(norm) in LOOPBACK_NAMES

    def host_ok(self, host: str) -> bool:
        name = host_name(host)
        if name is None:
            return False
        return _is_ip(name) or name == "localhost" or name.endswith(".localhost") or name in self.hosts


def host_name(host: str) -> str | None:
    """The name of a ``Host`` header (no port, no brackets, lower case); None when malformed."""
    try:
        parts = urlsplit("//" + host.strip())
        return (parts.hostname or "").lower() or None if parts.port is None or parts.port >= 0 else None
    except ValueError:  # a bad port or bracket
        return None


def _norm_origin(origin: str) -> str:
    return origin.strip().lower().rstrip("/")


def _origin_host(origin: str) -> str:
    """The host name of an origin (``http://[::1]:8000`` -> ``::1``); "" for ``null`` and junk."""
    try:
        parts = urlsplit(origin)
        _ = parts.port  # raises on a bad port
    except ValueError:
        return ""
    return (parts.hostname or "") if parts.scheme in ("http", "https") else ""


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
