"""The in-process backend: one engine, one model thread, one fair FIFO queue.

Contract (the ``Backend`` protocol of ``backend.py``): ``LocalBackend(engine, max_queue)`` or
``LocalBackend(loader=fn, max_queue=...)``, where ``fn()`` builds the engine on the model thread
itself (a language server answers ``initialize`` while the models load; ``wait_ready()`` /
``await ready()`` wait for them and re-raise a load error). The model thread is the only thread
that ever runs the engine: it takes requests first come first served, pulls each stream one step
at a time, checks for a cancel before and after every step, and closes every generator itself, so
cancellation and disconnection are safe at any point (invariant I6) and a request runs at most one
more step after its cancel, and a request whose consumer stopped reading for ``Request.idle_s``
is cancelled with stop "abandoned". ``submit(request, until=fn)`` (beyond the protocol;
``stops_early``) ends a request with stop "until" as soon as ``fn(event)`` says its caller has
what it needs, checked on the model thread right after the event is delivered. ``finished``
keeps a slim ``Record`` of the last 256 ended requests (no text, tokens or corpus). The queue
front (readiness, ``encode``, ``submit``, the cancel of a queued request) is
``queue_front.QueueFront``, shared with ``batch.BatchBackend``. ``drop_prefix(ids)`` (beyond the
protocol; any thread) has the model thread drop the target's kept prefix states of a document
whose last prompt was ``ids`` (``prefixes.drop``; an editor closed it), and the proposers'
kept caches of it (their optional ``drop_prefix`` hook: the draft model's), between requests.

Why a thread and a queue rather than a lock: an engine holds one request's caches, so requests
must take turns; a lock held across ``yield`` forced every front end to pull its stream from one
dedicated thread, and three front ends wrote three such runners. Owning the thread here means
front ends only submit, iterate and cancel.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from specdec.core.config import ConfigError
from specdec.fast import omp
from specdec.models import prefixes
from specdec.serving.backend import Capabilities, Handle, Limits, Request
from specdec.serving.queue_front import QueueFront

log = logging.getLogger("specdec.backend")


class LocalBackend(QueueFront):
    capabilities = Capabilities(heal=True)
    stops_early = True  # submit(request, until=fn): see submit

    def __init__(
        self,
        engine: Any = None,
        max_queue: int = 16,
        loader: Callable[[], Any] | None = None,
        name: str = "specdec-engine",
    ) -> None:
        super().__init__(engine, max_queue, loader)
        if engine is not None:
            self._loaded.set()
        self.running: Handle | None = None
        self._drops: list[list[int]] = []  # prompts whose kept prefix states go (drop_prefix)
        self._thread = threading.Thread(target=self._main, args=(loader,), name=name, daemon=True)
        self._thread.start()

    # -- what the engine offers (readiness, encode: QueueFront) ------------------------------------
    @property
    def limits(self) -> Limits:
        return Limits(context=self.engine.context, max_queue=self.max_queue)

    @property
    def idle(self) -> bool:
        with self._cond:
            return self.running is None and not self._queue

    # -- requests (submit and cancel: QueueFront) ----------------------------------------------------
    def submit(self, request: Request, until: Callable[[Any], bool] | None = None) -> Handle:
        """``until`` (this backend's extension, ``stops_early``): called on the model thread with
        each event after it is delivered; True ends the request there with stop "until", so no
        step runs after the caller knows its answer (a line completion at its newline)."""
        return self._enqueue(request, until=until)

    def drop_prefix(self, ids: list[int]) -> None:
        """Drop the kept prefix states of a closed document (its last prompt ``ids``), on the
        model thread before the next request (the engine is only ever touched there)."""
        with self._cond:
            self._drops.append(list(ids))
            self._cond.notify_all()

    def _cancel_running(self, handle: Handle, reason: str) -> None:
        if handle is self.running:
            handle.steps_at_cancel = handle.steps
            handle.cancel_reason = reason

    def _running(self) -> list[Handle]:
        return [] if self.running is None else [self.running]

    # -- the model thread ---------------------------------------------------------------------------
    def _main(self, loader: Callable[[], Any] | None) -> None:
        if loader is not None:
            self._load(loader)
        while True:
            with self._cond:
                if not self._queue and not self._closing and not self._drops:
                    omp.release_pool()  # idle: our OpenMP workers must not crowd another thread's team
                while not self._queue and not self._closing and not self._drops:
                    self._cond.wait()
                drops, self._drops = self._drops, []
                if not self._queue and not drops:
                    return
                handle = self.running = self._queue.popleft() if self._queue else None  # under the lock
            self._drop(drops)
            if handle is None:
                continue
            try:
                self._serve(handle)
            except BaseException as e:  # noqa: BLE001 - the model thread must outlive any request
                log.exception("request %r: unexpected failure", handle.request.id)
                if not handle.ended:
                    handle._end("error", e)
            finally:
                with self._cond:
                    self.running = None
                self._forget(handle)

    def _drop(self, drops: list[list[int]]) -> None:
        for ids in drops if self._engine is not None else ():
            try:
                prefixes.drop(self._engine.target, ids)
                for proposer in self._engine.proposers.values():  # the optional hook (proposers.base)
                    hook = getattr(proposer, "drop_prefix", None)
                    if hook is not None:
                        hook(ids)
            except Exception:  # noqa: BLE001 - a cache clean-up never stops the model thread
                log.exception("dropping a closed document's prefix states failed")

    def _serve(self, handle: Handle) -> None:
        handle._begin()
        req, stop, error, gen = handle.request, None, None, None
        try:
            gen = self._engine.stream(handle._ids, req.spec, req.corpus, req.tenant)
            while stop is None:
                if handle.cancel_reason is not None:
                    stop = handle.cancel_reason
                    break
                ev = next(gen, None)
                if ev is None:  # the loop always ends on an event with a stop; never seen
                    stop = "error"
                    break
                handle.steps += 1
                if handle.cancel_reason is not None:  # cancelled during this step: not delivered
                    stop = handle.cancel_reason
                    break
                handle._push(ev)
                stop = ev.stop
                if stop is None and handle.until is not None and handle.until(ev):
                    stop = "until"
                if stop is None and abandoned(handle):
                    handle.steps_at_cancel, handle.cancel_reason = handle.steps, "abandoned"
        except Exception as e:  # one request fails, never the backend
            if not isinstance(e, ConfigError):
                log.exception("request %r failed", req.id)
            stop, error = "error", e
        finally:
            if gen is not None:
                try:
                    gen.close()
                except Exception as e:  # noqa: BLE001
                    log.exception("request %r: closing its stream failed", req.id)
                    stop, error = "error", error or e
            handle._end(stop or "error", error)


def abandoned(handle: Handle) -> bool:
    idle = handle.request.idle_s
    return idle is not None and time.monotonic() - handle.last_read > idle
