"""The language server's lifecycle as the LSP specification has it, on top of pygls 2.

Contract: after ``shutdown``, every request but ``exit`` is answered with InvalidRequest
(-32600; pygls drops them unanswered) and notifications are ignored. ``exit`` stops the backend
at once (a running generation ends before its next step; pygls then closes the stream), and the
process exit status is 0 only if ``shutdown`` came first (``specdec/cli/lsp.py`` reads
``shut_down``; pygls catches its own ``sys.exit(1)``).
"""

from __future__ import annotations

import logging

from lsprotocol import types as t
from pygls.exceptions import JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import RPCRequest

log = logging.getLogger("specdec.lsp")


class SpecdecProtocol(LanguageServerProtocol):
    def handle_message(self, message) -> None:
        method = getattr(message, "method", "")
        if self._shutdown and method != t.EXIT:
            if isinstance(message, RPCRequest):
                err = JsonRpcInvalidRequest(f"the server is shut down: {method} after shutdown")
                self._send_response(message.id, error=err.to_response_error())
            return
        if method == t.EXIT:
            backend = getattr(self._server, "backend", None)
            running = getattr(backend, "running", None)
            if running is not None:
                log.info("exit: the running generation stops after step %d", running.steps)
            if backend is not None:
                backend.shutdown(0)  # a running generation ends before its next step
        super().handle_message(message)

    @property
    def shut_down(self) -> bool:
        return self._shutdown
