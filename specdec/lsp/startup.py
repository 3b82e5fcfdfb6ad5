"""Start fast and say so: the model loads after ``initialized``, with progress shown in the editor.

Why: an editor waits for ``initialize`` before it shows anything of the server, and loading a real
model took 130 s to 7 minutes (issue 53), with nothing on screen meanwhile and completions that
hung. Now ``initialize`` answers at once, loading starts when the client says ``initialized``, and
completions asked before the model is ready get an empty answer at once.

Contract:
- ``Gate``: ``then(loader)`` wraps a loader so it runs only once ``open()`` is called (on the
  model thread it blocks until then); ``cancel()`` (the client left first) makes it raise
  ``NeverStarted`` instead. ``open`` and ``cancel`` are idempotent and thread-safe.
- ``Loading(server)``: ``start()`` (idempotent; on ``initialized``, or on the first completion of
  a client that never sent it) opens the server's gate and runs ``watch()``: a work-done progress
  (``window/workDoneProgress/create``, then ``$/progress`` begin, a report per ``note(line)``, end)
  when the client supports it; on success the server's ``loaded(completer)`` is called, on a
  load error ``window/showMessage`` (Error) names it and the server keeps answering empty.
  ``note(line)`` may be called from any thread (the loader's, for ``--model auto``'s steps).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from lsprotocol import types as t

log = logging.getLogger("specdec.lsp")
TITLE = "specdec: loading the model"


class NeverStarted(RuntimeError):
    pass


class Gate:
    def __init__(self) -> None:
        self._event, self._cancelled = threading.Event(), False

    def open(self) -> None:
        self._event.set()

    def cancel(self) -> None:
        self._cancelled = True
        self._event.set()

    @property
    def opened(self) -> bool:
        return self._event.is_set() and not self._cancelled

    def then(self, loader: Callable[[], Any]) -> Callable[[], Any]:
        def gated():
            self._event.wait()
            if self._cancelled:
                raise NeverStarted("the client left before the model was asked for")
            return loader()

        return gated


class Loading:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.task: asyncio.Task | None = None
        self.token: str | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.error: BaseException | None = None
        self.pending: list[str] = []  # steps said before the progress began

    def start(self) -> None:
        if self.task is not None:
            return
        self.loop = asyncio.get_running_loop()
        self.server.gate.open()
        self.task = asyncio.ensure_future(self.watch())

    def _supports_progress(self) -> bool:
        window = getattr(self.server.client_capabilities, "window", None)
        return bool(getattr(window, "work_done_progress", False))

    async def watch(self) -> None:
        ls = self.server
        if self._supports_progress():
            token = str(uuid.uuid4())
            try:
                await ls.work_done_progress.create_async(token)
                ls.work_done_progress.begin(token, t.WorkDoneProgressBegin(title=TITLE, cancellable=False))
                self.token = token
                for line in self.pending:
                    self._report(line)
            except Exception as e:  # noqa: BLE001 - a client that refuses the token gets no progress
                log.info("no progress shown: %s", e)
        try:
            await ls.backend.ready()
            ls.loaded()
            self._end(f"ready: {ls.model_label()}")
        except Exception as e:  # noqa: BLE001 - the server keeps serving, with empty answers
            self.error = e
            log.error("the model failed to load: %s", e)
            self._end("failed")
            ls.window_show_message(
                t.ShowMessageParams(t.MessageType.Error, f"specdec: the model failed to load: {e} (see the log)")
            )

    def note(self, line: str) -> None:
        """One step of the loading (any thread): a progress report when progress is shown."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._report, line)

    def _report(self, line: str) -> None:
        if self.token is None:
            self.pending.append(line)
        else:
            message = line.removeprefix("specdec lsp: ")[:200]
            self.server.work_done_progress.report(self.token, t.WorkDoneProgressReport(message=message))

    def _end(self, message: str) -> None:
        if self.token is not None:
            token, self.token = self.token, None
            self.server.work_done_progress.end(token, t.WorkDoneProgressEnd(message=message))
            self.server.work_done_progress.tokens.pop(token, None)
